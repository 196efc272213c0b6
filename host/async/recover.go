package async

import (
	"fmt"
	"sort"

	"github.com/mce-run/mce/host/store"
)

// alreadyAnswered reports whether a recovered request's answer or failure
// is already in S3 (mce died between writing it and marking the request
// done); if so it marks the request done.
func (q *Queue) alreadyAnswered(it *item) bool {
	for _, url := range []string{it.rec.Output, it.rec.Failure} {
		if !q.OutputAllowed(url) {
			continue
		}
		meta, err := q.o.Objects.ObjectMetadata(q.ctx, url)
		if err == nil && meta[MetaRequest] == it.rec.Key {
			q.forget(it)
			q.log.Info().Str("endpoint", it.rec.Endpoint).Str("inference_id", it.rec.InferenceID).Str("request", it.rec.Key).
				Str("location", url).Msg("async request was answered before the restart")
			return true
		}
	}
	return false
}

// forget marks a request done in the store.
func (q *Queue) forget(it *item) {
	q.inline.Add(-int64(it.rec.InlineSize))
	if err := q.o.Store.DeleteBatched(store.AsyncRequests, it.rec.Key); err != nil {
		q.log.Error().Err(err).Str("request", it.rec.Key).Msg("could not mark the async request done; it will be answered again after a restart")
	}
}

// Recover queues again every request the store holds, oldest first.
// Call it after the endpoints are back in the registry.
func (q *Queue) Recover() error {
	var recs []Record
	if err := store.List(q.o.Store, store.AsyncRequests, func(r Record) error { recs = append(recs, r); return nil }); err != nil {
		return fmt.Errorf("read queued async requests from the state: %w", err)
	}
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].Accepted.Equal(recs[j].Accepted) {
			return recs[i].Accepted.Before(recs[j].Accepted)
		}
		return recs[i].Key < recs[j].Key
	})
	if len(recs) > 0 && q.o.Objects == nil {
		return fmt.Errorf("the state holds %d queued async requests, but mce has no S3 access to answer them", len(recs))
	}
	for _, r := range recs {
		q.inline.Add(int64(r.InlineSize))
		r.Body = nil // in the store; run reads it back
		q.enqueue(&item{rec: r, recovered: true})
	}
	if len(recs) > 0 {
		q.log.Info().Int("requests", len(recs)).Msg("async requests queued again after a restart")
	}
	return nil
}
