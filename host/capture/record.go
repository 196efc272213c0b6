package capture

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// Record is one line of a capture file, as SageMaker writes it
// (https://docs.aws.amazon.com/sagemaker/latest/dg/model-monitor-data-capture-endpoint.html,
// "View Captured Data"): the payloads in captureData, the event's identity
// and time in eventMetadata, and eventVersion "0". Readers (tests, tools)
// can decode a line into it.
type Record struct {
	CaptureData   CaptureData   `json:"captureData"`
	EventMetadata EventMetadata `json:"eventMetadata"`
	EventVersion  string        `json:"eventVersion"`
}

// CaptureData holds what the configuration's CaptureOptions keep: the
// request (endpointInput), the answer (endpointOutput), or both.
type CaptureData struct {
	EndpointInput  *Payload `json:"endpointInput,omitempty"`
	EndpointOutput *Payload `json:"endpointOutput,omitempty"`
}

// Payload is one captured body: its Content-Type as observed on the call,
// ModeInput or ModeOutput, the data as text (EncodingCSV, EncodingJSON) or
// base64 (EncodingBase64).
type Payload struct {
	ObservedContentType string `json:"observedContentType"`
	Mode                string `json:"mode"`
	Data                string `json:"data"`
	Encoding            string `json:"encoding"`
}

// EventMetadata identifies the call: EventID is a random UUID of mce's,
// InferenceID the caller's X-Amzn-SageMaker-Inference-Id when it gave one
// (Model Monitor matches ground truth to it before EventID,
// https://docs.aws.amazon.com/sagemaker/latest/dg/model-monitor-model-quality-merge.html),
// InferenceTime when the call arrived, in UTC to the second (TimeLayout).
type EventMetadata struct {
	EventID       string `json:"eventId"`
	InferenceID   string `json:"inferenceId,omitempty"`
	InferenceTime string `json:"inferenceTime"`
}

// TimeLayout is inferenceTime's format: "2022-02-14T17:25:49Z".
const TimeLayout = "2006-01-02T15:04:05Z"

// EventVersion is the only eventVersion SageMaker writes.
const EventVersion = "0"

// Bytes is the payload's bytes, decoded from base64 when it was written so.
func (p *Payload) Bytes() ([]byte, error) {
	switch p.Encoding {
	case EncodingCSV, EncodingJSON:
		return []byte(p.Data), nil
	case EncodingBase64:
		return base64.StdEncoding.DecodeString(p.Data)
	}
	return nil, errors.New("capture: unknown encoding " + strconv.Quote(p.Encoding))
}

// ContentType is the Content-Type of the objects written: JSON Lines, by
// the name SageMaker gives that format elsewhere (batch transform's
// application/jsonlines).
const ContentType = "application/jsonlines"

// appendRecord writes r's line (with its newline) to buf. JSON is written
// as SageMaker's service writes it: no HTML escaping of <, > and &.
func appendRecord(buf *bytes.Buffer, r *pending, eventID string) error {
	rec := Record{EventVersion: EventVersion, EventMetadata: EventMetadata{
		EventID: eventID, InferenceID: r.inferenceID, InferenceTime: r.at.UTC().Format(TimeLayout)}}
	if r.hasInput {
		data, enc := encodeData(r.inType, r.input, r.pol.csv, r.pol.json)
		rec.CaptureData.EndpointInput = &Payload{ObservedContentType: r.inType, Mode: ModeInput, Data: data, Encoding: enc}
	}
	if r.hasOutput {
		data, enc := encodeData(r.outType, r.output, r.pol.csv, r.pol.json)
		rec.CaptureData.EndpointOutput = &Payload{ObservedContentType: r.outType, Mode: ModeOutput, Data: data, Encoding: enc}
	}
	e := json.NewEncoder(buf)
	e.SetEscapeHTML(false)
	return e.Encode(&rec) // Encode ends the line with "\n"
}

// objectURL is where a batch whose first record arrived at first goes:
// DEST/ENDPOINT/VARIANT/yyyy/mm/dd/hh/mm-ss-SSS-UUID.jsonl, in UTC, as
// SageMaker names its capture files (for example
// .../AllTraffic/2020/03/11/12/32-18-648-cee08c3a-02ce-4790-b8ba-3173cfc12813.jsonl).
func objectURL(dest, endpoint, variant string, first time.Time, id string) string {
	t := first.UTC()
	b := make([]byte, 0, len(dest)+len(endpoint)+len(variant)+len(id)+40)
	b = append(b, dest...)
	b = append(b, '/')
	b = append(b, endpoint...)
	b = append(b, '/')
	b = append(b, variant...)
	b = append(b, '/')
	b = t.AppendFormat(b, "2006/01/02/15/04-05-")
	b = appendPadded(b, t.Nanosecond()/int(time.Millisecond), 3)
	b = append(b, '-')
	b = append(b, id...)
	b = append(b, ".jsonl"...)
	return string(b)
}

func appendPadded(b []byte, n, width int) []byte {
	s := strconv.Itoa(n)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}
