package async

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/wire"
)

// ObjectStore is the S3 access asynchronous inference needs;
// *artifact.Fetcher implements it with mce's S3 settings. Missing objects are
// errors wrapping artifact.ErrNotFound.
type ObjectStore interface {
	OpenObject(ctx context.Context, url string) (io.ReadCloser, artifact.ObjectInfo, error)
	PutObject(ctx context.Context, url string, body []byte, contentType string, meta map[string]string) error
	ObjectMetadata(ctx context.Context, url string) (map[string]string, error)
}

// input is a request's input, read whole, and the memory lease that
// covers it and the answers still to come.
type input struct {
	body        []byte
	contentType string // the object's
	lease       lease
}

// input is a request's input: its inline body, read back from the store
// within the memory budget as readInput reserves it, or the object at its
// InputLocation (readInput).
func (q *Queue) input(rec Record, answers int64) (input, *apierr.Error) {
	if rec.InlineSize == 0 {
		return q.readInput(rec, answers)
	}
	want := min(int64(rec.InlineSize)+answers*q.o.MaxPayload, q.o.Memory)
	if err := q.memory.Acquire(q.ctx, want); err != nil {
		return input{}, &apierr.Error{Status: http.StatusServiceUnavailable, Code: apierr.CodeServiceUnavail, Message: "mce is stopping."}
	}
	in := input{lease: lease{sem: q.memory, n: want}}
	var full Record
	if err := q.o.Store.Get(store.AsyncRequests, rec.Key, &full); err != nil || len(full.Body) != rec.InlineSize {
		in.lease.release()
		return input{}, &apierr.Error{Status: http.StatusInternalServerError, Code: apierr.CodeInternalFailure,
			Message: "mce could not read the inline input of inference request " + rec.InferenceID + " back from its state."}
	}
	q.hold(int64(cap(full.Body)))
	in.body = full.Body
	return in, nil
}

// readInput reads the input object whole, within the size cap, after
// reserving memory from the budget for it and for answers bodies of up to
// the cap each (the answer's size is not known before it arrives); fail
// says why it could not.
func (q *Queue) readInput(rec Record, answers int64) (in input, fail *apierr.Error) {
	rc, info, err := q.o.Objects.OpenObject(q.ctx, rec.Input)
	if err != nil {
		if errors.Is(err, artifact.ErrNotFound) {
			return in, apierr.Validation("Could not read the input of inference request %s: there is no object at InputLocation %s.", rec.InferenceID, rec.Input)
		}
		return in, apierr.Validation("Could not read the input of inference request %s from InputLocation %s: %s", rec.InferenceID, rec.Input, apierr.RedactPaths(err.Error()))
	}
	defer rc.Close()
	limit := q.o.MaxPayload
	size := info.Size
	if size > limit {
		return in, apierr.Validation("The input of inference request %s at %s is %d bytes, more than mce's limit of %d bytes (mce serve --async-max-payload).",
			rec.InferenceID, rec.Input, size, limit)
	}
	want := size
	if want < 0 {
		want = limit
	}
	// One request always fits: a chain's reservation may exceed the
	// budget, and then takes all of it.
	want = min(want+answers*limit, q.o.Memory)
	if err := q.memory.Acquire(q.ctx, want); err != nil {
		return in, &apierr.Error{Status: http.StatusServiceUnavailable, Code: apierr.CodeServiceUnavail, Message: "mce is stopping."}
	}
	in.lease = lease{sem: q.memory, n: want}
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("more than %d bytes", limit)
	}
	if err != nil {
		in.lease.release()
		return input{}, apierr.Validation("Could not read the input of inference request %s from InputLocation %s: %s", rec.InferenceID, rec.Input, apierr.RedactPaths(err.Error()))
	}
	q.hold(int64(cap(b)))
	in.body, in.contentType = b, info.ContentType
	return in, nil
}

// finish writes the answer (fail == nil) or the failure, then marks the
// request done. A failure is written as the JSON error body InvokeEndpoint
// would have answered ({"__type": …, "Message": …}, application/json), so
// that clients that deserialize it as JSON — the SageMaker Python SDK's
// AsyncInferenceResponse with a JSONDeserializer — get its message. A
// failed write leaves the request queued: it is tried again, in this run or
// the next.
func (q *Queue) finish(it *item, contentType string, body []byte, fail *apierr.Error) {
	rec := it.rec
	url, outcome := rec.Output, "answered"
	if fail != nil {
		url, outcome, body, contentType = rec.Failure, "failed", apierr.JSON(fail), "application/json"
	}
	if !q.OutputAllowed(url) {
		// Accepted before a restart with narrower --async-output-prefix.
		q.log.Error().Str("endpoint", rec.Endpoint).Str("request", rec.Key).Str("location", url).
			Msg("async result not written: its location is outside --async-output-prefix; the request is dropped")
		q.forget(it)
		q.metrics.completed.WithLabelValues(rec.Endpoint, "dropped").Inc()
		return
	}
	meta := map[string]string{MetaRequest: rec.Key, "inference-id": sanitizeMeta(rec.InferenceID)}
	err := q.o.Objects.PutObject(q.ctx, url, body, contentType, meta)
	if err != nil {
		if q.ctx.Err() != nil {
			return
		}
		q.log.Error().Err(err).Str("endpoint", rec.Endpoint).Str("request", rec.Key).Str("location", url).
			Msg("could not write the async result; the request stays queued and runs again")
		q.metrics.writeErrors.WithLabelValues(rec.Endpoint).Inc()
		select { // do not spin on a store that is down; Close does not wait for it
		case <-time.After(time.Second):
		case <-q.ctx.Done():
			return // the request stays queued for the next start
		}
		q.enqueue(&item{rec: rec, recovered: true})
		return
	}
	q.forget(it)
	q.metrics.completed.WithLabelValues(rec.Endpoint, outcome).Inc()
	ev := q.log.Info()
	if fail != nil {
		ev = ev.Str("why", fail.Message)
	}
	ev.Str("endpoint", rec.Endpoint).Str("inference_id", rec.InferenceID).Str("request", rec.Key).
		Str("location", url).Msg("async request " + outcome)
}

// sanitizeMeta keeps S3 user metadata to printable ASCII.
func sanitizeMeta(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r > '~' {
			return '_'
		}
		return r
	}, s)
}

// dotSegment reports whether the key of s3://bucket/key has a ., .. or
// empty segment (wire.S3KeyRefused): S3 takes such keys literally, but a
// file-backed S3 server may resolve them, stepping out of a prefix or
// reaching another object than the one authorized.
func dotSegment(url string) bool {
	return wire.S3KeyRefused(url) != ""
}

// InputScope refuses an InputLocation outside Options.InputPrefixes, or
// one whose key has an empty, . or .. segment.
func (q *Queue) InputScope(url string) *apierr.Error {
	if inPrefixes(url, q.o.InputPrefixes) && !dotSegment(url) {
		return nil
	}
	return &apierr.Error{Status: http.StatusForbidden, Code: apierr.CodeAccessDenied, Message: fmt.Sprintf(
		"InputLocation %s is outside the S3 prefixes mce reads asynchronous inputs from (mce serve --async-input-prefix).", apierr.Truncate(url, 256))}
}

// OutputAllowed reports whether url lies within Options.OutputPrefixes.
func (q *Queue) OutputAllowed(url string) bool {
	return inPrefixes(url, q.o.OutputPrefixes)
}

// inPrefixes reports whether url starts with one of prefixes; every url
// does when there are none.
func inPrefixes(url string, prefixes []string) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, p := range prefixes {
		if strings.HasPrefix(url, p) {
			return true
		}
	}
	return false
}

// NormalizeS3Prefix checks an operator's s3://bucket[/folder] for
// --async-input-prefix and --async-output-prefix and returns it in the form
// matched: it names a folder, and gains a final slash, so that s3://data/in
// does not also match s3://data/inbox/… nor s3://data s3://data-private/….
func NormalizeS3Prefix(p string) (string, error) {
	rest, ok := strings.CutPrefix(p, "s3://")
	b, key, _ := strings.Cut(rest, "/")
	if !ok || b == "" || strings.ContainsAny(b, " \t") {
		return "", fmt.Errorf("S3 prefix %q: want s3://bucket or s3://bucket/prefix", p)
	}
	if dotSegment(p) {
		return "", fmt.Errorf("S3 prefix %q: a . or .. path segment", p)
	}
	if key != "" && !strings.HasSuffix(key, "/") {
		key += "/"
	}
	return "s3://" + b + "/" + key, nil
}
