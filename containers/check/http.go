package check

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// newHTTPClient talks to the containers of one check: no proxy from the
// environment (the addresses are on the check's own network), short dials,
// and a time limit on every call through its context.
func newHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     30 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// answer is what a container answered to one call.
type answer struct {
	status      int
	contentType string
	size        int64  // body bytes, counted up to maxCount
	over        bool   // the body went past maxCount
	body        []byte // its first keepBytes
	took        time.Duration
}

const (
	keepBytes = 64 << 10
	maxCount  = MaxInput // a response past this is over SageMaker's limit
)

// call sends one request and reads the answer, bounded by timeout.
func (c *Checker) call(ctx context.Context, method, url string, body []byte, hdr map[string]string, timeout time.Duration) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return answer{}, err
	}
	for k, v := range hdr {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{took: time.Since(start)}, describeHTTP(err, timeout)
	}
	defer resp.Body.Close()
	var keep bytes.Buffer
	n, err := io.Copy(&keep, io.LimitReader(resp.Body, keepBytes))
	if err == nil && n == keepBytes {
		var m int64
		m, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxCount-keepBytes+1))
		n += m
	}
	a := answer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), size: min(n, maxCount),
		over: n > maxCount, body: keep.Bytes(), took: time.Since(start)}
	if err != nil {
		return a, fmt.Errorf("reading the answer: %w", describeHTTP(err, timeout))
	}
	return a, nil
}

// describeHTTP drops the method and URL the client puts in front (the
// report names the check) and says what a timeout was.
func describeHTTP(err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s", timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// summary describes an answer in one line: status, type, size, a snippet.
func (a answer) summary() string {
	ct := a.contentType
	if ct == "" {
		ct = "no content type"
	}
	s := fmt.Sprintf("%d, %s, %s", a.status, ct, sizeText(a.size, a.over))
	if snip := snippet(a.body); snip != "" {
		s += ": " + snip
	}
	return s
}

func sizeText(n int64, over bool) string {
	switch {
	case over:
		return "over 6 MiB"
	case n < 10<<10:
		return fmt.Sprintf("%d B", n)
	default:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
}

// snippet is the start of a body, printable, for a report line.
func snippet(b []byte) string {
	const max = 120
	s := strings.ToValidUTF8(string(b[:min(len(b), 4*max)]), "?")
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}
