package modelserver

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// writeJSON is smserve.WriteJSON without HTML escaping, so that messages read as Triton writes them
// ("/opt/ml/models/<hash>/model", not "\u003chash\u003e").
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		smserve.WriteJSON(w, status, v) // reports the encoding failure as a 500
		return
	}
	smserve.Write(w, status, "application/json", buf.Bytes())
}

// writeError answers {"error": "…"} with smserve.StatusOf(err).
func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, smserve.StatusOf(err), map[string]string{"error": err.Error()})
}

// handlerFunc is smserve.HandlerFunc with writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (f handlerFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := f(w, r); err != nil {
		writeError(w, err)
	}
}
