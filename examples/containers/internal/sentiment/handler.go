package sentiment

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// Media types.
const (
	TypeText = "text/plain"
	TypeJSON = "application/json"
	TypeCSV  = "text/csv"
)

// MaxTexts caps the instances in one request.
const MaxTexts = 10000

// Handler serves POST /invocations. It is safe for concurrent use.
type Handler struct {
	a   *Analyzer
	neg smserve.Negotiator
}

// NewHandler returns a handler scoring with a. defaultAccept (SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT) may
// replace application/json as the default output type.
func NewHandler(a *Analyzer, defaultAccept string) (*Handler, error) {
	neg, err := smserve.NewNegotiator([]string{TypeText, TypeJSON}, []string{TypeJSON, TypeCSV}, defaultAccept)
	if err != nil {
		return nil, err
	}
	return &Handler{a: a, neg: neg}, nil
}

// Predictions is the application/json answer to an "instances" request.
type Predictions struct {
	Predictions []Result `json:"predictions"`
}

// ServeHTTP scores the request's texts.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	smserve.HandlerFunc(h.invoke).ServeHTTP(w, r)
}

func (h *Handler) invoke(w http.ResponseWriter, r *http.Request) error {
	in, out, body, err := h.neg.Accept(w, r)
	if err != nil {
		return err
	}
	texts, batch, err := DecodeTexts(in, body)
	if err != nil {
		return err
	}
	results := make([]Result, len(texts))
	for i, t := range texts {
		results[i] = h.a.Analyze(t)
	}
	switch {
	case out == TypeCSV:
		var b []byte
		for _, res := range results {
			b = append(b, res.Language...)
			b = append(b, ',')
			b = append(b, res.Label...)
			b = append(b, ',')
			b = strconv.AppendFloat(b, res.Score, 'f', -1, 64)
			b = append(b, '\n')
		}
		smserve.Write(w, http.StatusOK, TypeCSV, b)
	case batch:
		smserve.WriteJSON(w, http.StatusOK, Predictions{Predictions: results})
	default:
		smserve.WriteJSON(w, http.StatusOK, results[0])
	}
	return nil
}

// DecodeTexts parses a request body of media type mediaType. text/plain: the whole body is one text.
// application/json: {"text": "…"} (one text) or {"instances": ["…", …]} (batch is true). Errors are 4xx
// *smserve.Error values.
func DecodeTexts(mediaType string, body []byte) (texts []string, batch bool, err error) {
	if !utf8.Valid(body) {
		return nil, false, smserve.Errorf(http.StatusBadRequest, "body is not valid UTF-8")
	}
	switch mediaType {
	case TypeText:
		if strings.TrimSpace(string(body)) == "" {
			return nil, false, smserve.Errorf(http.StatusBadRequest, "empty text")
		}
		return []string{string(body)}, false, nil
	case TypeJSON:
		var in struct {
			Text      *string  `json:"text"`
			Instances []string `json:"instances"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(body), &in); err != nil {
			return nil, false, smserve.Errorf(http.StatusBadRequest, `JSON body must be {"text": "…"} or {"instances": ["…", …]}: %w`, err)
		}
		switch {
		case in.Text != nil && in.Instances != nil:
			return nil, false, smserve.Errorf(http.StatusBadRequest, `give either "text" or "instances", not both`)
		case in.Text != nil:
			return []string{*in.Text}, false, nil
		case len(in.Instances) > MaxTexts:
			return nil, false, smserve.Errorf(http.StatusRequestEntityTooLarge, "more than %d instances", MaxTexts)
		case len(in.Instances) > 0:
			return in.Instances, true, nil
		default:
			return nil, false, smserve.Errorf(http.StatusBadRequest, `JSON body has no "text" and no "instances"`)
		}
	default:
		return nil, false, smserve.Errorf(http.StatusUnsupportedMediaType, "unsupported media type %q", mediaType)
	}
}
