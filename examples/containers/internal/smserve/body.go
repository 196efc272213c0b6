package smserve

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
)

// MaxBodyBytes caps every request body: the SageMaker runtime payload limit of 6 MiB (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html).
const MaxBodyBytes int64 = 6 << 20

// ReadBody reads the whole request body, refusing more than MaxBodyBytes with a 413 *Error wrapping
// ErrBodyTooLarge. A declared Content-Length above the cap is refused before reading.
func ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > MaxBodyBytes {
		return nil, tooLarge()
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge()
		}
		return nil, Errorf(http.StatusBadRequest, "read request body: %w", err)
	}
	return buf.Bytes(), nil
}

func tooLarge() error {
	return &Error{
		Status:  http.StatusRequestEntityTooLarge,
		Message: fmt.Sprintf("request body exceeds %d bytes", MaxBodyBytes),
		Err:     ErrBodyTooLarge,
	}
}
