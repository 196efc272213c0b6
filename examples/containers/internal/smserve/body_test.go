package smserve

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadBody(t *testing.T) {
	tests := []struct {
		name          string
		size          int64
		hideLength    bool
		declaredLarge bool
		wantErr       bool
	}{
		{name: "empty", size: 0},
		{name: "small", size: 10},
		{name: "at cap", size: MaxBodyBytes},
		{name: "over cap declared", size: MaxBodyBytes + 1, wantErr: true},
		{name: "over cap chunked", size: MaxBodyBytes + 1, hideLength: true, wantErr: true},
		{name: "lying length", size: 10, declaredLarge: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload := bytes.Repeat([]byte("z"), int(tt.size))
			req := httptest.NewRequest(http.MethodPost, "/invocations", bytes.NewReader(payload))
			if tt.hideLength {
				req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(payload))) // no length known
				req.ContentLength = -1
			}
			if tt.declaredLarge {
				req.ContentLength = MaxBodyBytes + 100
			}
			got, err := ReadBody(httptest.NewRecorder(), req)
			if tt.wantErr {
				if !errors.Is(err, ErrBodyTooLarge) || StatusOf(err) != http.StatusRequestEntityTooLarge {
					t.Fatalf("err = %v, want 413 ErrBodyTooLarge", err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("got %d bytes, %v; want %d bytes", len(got), err, len(payload))
			}
		})
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

func TestReadBodyReadError(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/invocations", io.NopCloser(failingReader{}))
	_, err := ReadBody(httptest.NewRecorder(), req)
	if StatusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "connection reset") {
		t.Errorf("err = %v (status %d), want 400 naming the cause", err, StatusOf(err))
	}
}
