package capture

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// Encodings of a captured payload (Payload.Encoding).
const (
	EncodingCSV    = "CSV"
	EncodingJSON   = "JSON"
	EncodingBase64 = "BASE64"
)

// Modes of a captured payload (Payload.Mode).
const (
	ModeInput  = "INPUT"
	ModeOutput = "OUTPUT"
)

// EncodingFor is how SageMaker writes a payload of contentType given the
// configuration's CaptureContentTypeHeader lists:
// EncodingCSV when its media type — the value before any ";" parameters,
// without surrounding spaces, compared without regard to case, as media
// types are (RFC 9110 §8.3.1) — is in csv, EncodingJSON when it is in
// json, EncodingBase64 otherwise. With no lists (no CaptureContentTypeHeader)
// everything is base64, as the API reference says and captured files show
// (text/csv and application/json both written as BASE64). So "text/csv;
// charset=utf-8", the answer SageMaker's own example shows written as CSV,
// matches a list holding text/csv.
func EncodingFor(contentType string, csv, json []string) string {
	if len(csv) == 0 && len(json) == 0 {
		return EncodingBase64
	}
	mt := mediaType(contentType)
	if mt == "" {
		return EncodingBase64
	}
	for _, t := range csv {
		if strings.EqualFold(mt, t) {
			return EncodingCSV
		}
	}
	for _, t := range json {
		if strings.EqualFold(mt, t) {
			return EncodingJSON
		}
	}
	return EncodingBase64
}

// mediaType is contentType without parameters and surrounding whitespace.
func mediaType(contentType string) string {
	if i := strings.IndexByte(contentType, ';'); i >= 0 {
		contentType = contentType[:i]
	}
	return strings.Trim(contentType, " \t")
}

// encodeData is a payload as the record's data and its encoding: the text
// itself for CSV and JSON, base64 otherwise. A payload that is not valid
// UTF-8 cannot be carried as JSON text without loss, so it is written in
// base64 whatever its content type (its encoding says so).
func encodeData(contentType string, data []byte, csv, json []string) (string, string) {
	enc := EncodingFor(contentType, csv, json)
	if enc != EncodingBase64 && utf8.Valid(data) {
		return string(data), enc
	}
	return base64.StdEncoding.EncodeToString(data), EncodingBase64
}
