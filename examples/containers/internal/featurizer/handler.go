package featurizer

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
	"github.com/mce-run/mce/examples/containers/internal/textfeat"
)

// Handler serves POST /invocations. It is safe for concurrent use.
type Handler struct {
	vocab *textfeat.Vocabulary
	neg   smserve.Negotiator
}

// NewHandler returns a handler featurizing with vocab. defaultAccept (SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT)
// may replace text/csv as the default output type.
func NewHandler(vocab *textfeat.Vocabulary, defaultAccept string) (*Handler, error) {
	neg, err := smserve.NewNegotiator([]string{TypeText, TypeJSON}, []string{TypeCSV, TypeJSON}, defaultAccept)
	if err != nil {
		return nil, err
	}
	return &Handler{vocab: vocab, neg: neg}, nil
}

// ServeHTTP featurizes the request's documents.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	smserve.HandlerFunc(h.invoke).ServeHTTP(w, r)
}

func (h *Handler) invoke(w http.ResponseWriter, r *http.Request) error {
	in, out, body, err := h.neg.Accept(w, r)
	if err != nil {
		return err
	}
	docs, err := DecodeDocuments(in, body)
	if err != nil {
		return err
	}
	if len(docs) > MaxDocuments || len(docs)*h.vocab.Len() > MaxCells {
		return smserve.Errorf(http.StatusRequestEntityTooLarge,
			"%d documents × %d features is too many (at most %d documents and %d values)",
			len(docs), h.vocab.Len(), MaxDocuments, MaxCells)
	}
	vecs := make([][]float64, len(docs))
	for i, d := range docs {
		vecs[i] = h.vocab.Vectorize(d, nil)
	}
	if out == TypeJSON {
		b, err := json.Marshal(instances{Instances: vecs})
		if err != nil {
			return err
		}
		smserve.Write(w, http.StatusOK, TypeJSON, append(b, '\n'))
		return nil
	}
	smserve.Write(w, http.StatusOK, TypeCSV, appendCSV(nil, vecs))
	return nil
}

// instances is the JSON shape of the output: {"instances": [[…], …]}.
type instances struct {
	Instances [][]float64 `json:"instances"`
}

// appendCSV writes one line per vector, values in Go's shortest exact form ("0", "0.4472135954999579").
func appendCSV(b []byte, vecs [][]float64) []byte {
	for _, v := range vecs {
		for j, x := range v {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendFloat(b, x, 'g', -1, 64)
		}
		b = append(b, '\n')
	}
	return b
}
