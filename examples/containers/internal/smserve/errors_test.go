package smserve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestStatusOf(t *testing.T) {
	cause := errors.New("cause")
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"typed", Errorf(http.StatusBadRequest, "bad"), http.StatusBadRequest},
		{"wrapped typed", fmt.Errorf("ctx: %w", Errorf(http.StatusConflict, "c")), http.StatusConflict},
		{"max bytes", fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 1}), http.StatusRequestEntityTooLarge},
		{"plain", cause, http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StatusOf(tt.err); got != tt.want {
				t.Errorf("StatusOf = %d, want %d", got, tt.want)
			}
		})
	}
	if err := Errorf(400, "x: %w", cause); !errors.Is(err, cause) {
		t.Errorf("Errorf lost its cause: %v", err)
	}
}

func TestHandlerFunc(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantBody   string
	}{
		{"ok", nil, http.StatusTeapot, ""},
		{"typed error", Errorf(http.StatusBadRequest, "row %d is wrong", 3), http.StatusBadRequest, "row 3 is wrong"},
		{"other error", errors.New("disk on fire"), http.StatusInternalServerError, "disk on fire"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
				if tt.err != nil {
					return tt.err
				}
				w.WriteHeader(http.StatusTeapot)
				return nil
			})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/invocations", nil))
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d", rec.Code, tt.wantStatus)
			}
			if tt.err == nil {
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			var body struct{ Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error != tt.wantBody {
				t.Errorf("body = %q (%v), want error %q", rec.Body.String(), err, tt.wantBody)
			}
		})
	}
}
