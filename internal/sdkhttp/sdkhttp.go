// Package sdkhttp is the HTTP client mce gives aws-sdk-go-v2 for calls whose
// request body is in memory.
//
// smithy-go wraps every request body in a reader that it closes as soon as
// the response headers arrive, and whose WriteTo returns io.EOF once closed
// (smithy-go v1.28.9, transport/http/internal/io/safe.go). net/http writes a
// body of known length and then reads it once more to check that nothing is
// left over; when a fast server has already answered, that second read meets
// the closed wrapper, gets io.EOF as an error, and the transport closes the
// connection under the response it is still reading. A buffered response is
// retried by the SDK (aws/aws-sdk-go-v2#2737); a response stream cannot be,
// and dies with "use of closed network connection". Handing the transport a
// body of its own that the SDK never closes removes the race.
package sdkhttp

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// MaxCopy is the largest request body Client copies; a larger one (or one
// of unknown length) goes to the transport as the SDK built it. It is above
// InvokeEndpoint's 6 MB and InvokeEndpointWithResponseStream's 25 MB limits.
const MaxCopy = 32 << 20

// Doer is what the SDK calls to send a request (aws.HTTPClient).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// Client sends requests through Next with a request body the SDK cannot
// close under the transport.
type Client struct {
	Next Doer
}

// New returns a Client over the SDK's default buildable client.
func New() *Client { return &Client{Next: awshttp.NewBuildableClient()} }

// Do implements aws.HTTPClient.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody || req.ContentLength <= 0 || req.ContentLength > MaxCopy {
		return c.Next.Do(req)
	}
	b := make([]byte, req.ContentLength)
	_, err := io.ReadFull(req.Body, b)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the request body of %d bytes: %w", req.ContentLength, err)
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return c.Next.Do(r)
}
