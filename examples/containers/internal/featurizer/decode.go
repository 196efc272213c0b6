package featurizer

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// DecodeDocuments parses a request body of media type mediaType (TypeText or TypeJSON) into documents.
// text/plain: one document per line (LF or CRLF; one final line break is not a document), so an empty line
// is an empty document and answers keep the line order. application/json: {"instances": ["…", …]} or a
// bare array of strings. Errors are 400 *smserve.Error values.
func DecodeDocuments(mediaType string, body []byte) ([]string, error) {
	if !utf8.Valid(body) {
		return nil, smserve.Errorf(http.StatusBadRequest, "body is not valid UTF-8")
	}
	var docs []string
	switch mediaType {
	case TypeText:
		s := strings.TrimSuffix(strings.TrimSuffix(string(body), "\n"), "\r")
		if s == "" {
			return nil, smserve.Errorf(http.StatusBadRequest, "no documents: the body is empty")
		}
		docs = strings.Split(s, "\n")
		for i, d := range docs {
			docs[i] = strings.TrimSuffix(d, "\r")
		}
	case TypeJSON:
		trimmed := bytes.TrimSpace(body)
		var err error
		if len(trimmed) > 0 && trimmed[0] == '[' {
			err = json.Unmarshal(trimmed, &docs)
		} else {
			var in struct {
				Instances []string `json:"instances"`
			}
			err = json.Unmarshal(trimmed, &in)
			docs = in.Instances
		}
		if err != nil {
			return nil, smserve.Errorf(http.StatusBadRequest,
				`JSON body must be {"instances": ["text", …]} or ["text", …]: %w`, err)
		}
		if len(docs) == 0 {
			return nil, smserve.Errorf(http.StatusBadRequest, "no documents: instances is missing or empty")
		}
	default:
		return nil, smserve.Errorf(http.StatusUnsupportedMediaType, "unsupported media type %q", mediaType)
	}
	return docs, nil
}
