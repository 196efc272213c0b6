package classifier

import (
	"bytes"
	"encoding/csv"
	"net/http"

	"github.com/mce-run/mce/examples/containers/internal/logreg"
	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// Handler serves POST /invocations. It is safe for concurrent use.
type Handler struct {
	model *logreg.Model
	neg   smserve.Negotiator
}

// NewHandler returns a handler predicting with m, which must be valid. defaultAccept
// (SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT) may replace application/json as the default output type.
func NewHandler(m *logreg.Model, defaultAccept string) (*Handler, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	neg, err := smserve.NewNegotiator([]string{TypeCSV, TypeJSON}, []string{TypeJSON, TypeCSV}, defaultAccept)
	if err != nil {
		return nil, err
	}
	return &Handler{model: m, neg: neg}, nil
}

// Prediction is one instance's answer.
type Prediction struct {
	Label         string             `json:"label"`
	Probabilities map[string]float64 `json:"probabilities"`
}

// Response is the application/json output.
type Response struct {
	Predictions []Prediction `json:"predictions"`
}

// ServeHTTP classifies the request's rows.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	smserve.HandlerFunc(h.invoke).ServeHTTP(w, r)
}

func (h *Handler) invoke(w http.ResponseWriter, r *http.Request) error {
	in, out, body, err := h.neg.Accept(w, r)
	if err != nil {
		return err
	}
	rows, err := DecodeRows(in, body, h.model.Features())
	if err != nil {
		return err
	}
	if out == TypeCSV {
		var buf bytes.Buffer
		cw := csv.NewWriter(&buf)
		for _, x := range rows {
			i, _ := h.model.Predict(x, nil)
			if err := cw.Write([]string{h.model.Labels[i]}); err != nil {
				return err
			}
		}
		if cw.Flush(); cw.Error() != nil {
			return cw.Error()
		}
		smserve.Write(w, http.StatusOK, TypeCSV, buf.Bytes())
		return nil
	}
	resp := Response{Predictions: make([]Prediction, len(rows))}
	for n, x := range rows {
		i, p := h.model.Predict(x, nil)
		probs := make(map[string]float64, len(p))
		for j, l := range h.model.Labels {
			probs[l] = p[j]
		}
		resp.Predictions[n] = Prediction{Label: h.model.Labels[i], Probabilities: probs}
	}
	smserve.WriteJSON(w, http.StatusOK, resp)
	return nil
}
