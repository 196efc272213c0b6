package host

import (
	"fmt"
	"sort"

	"github.com/mce-run/mce/host/store"
)

// alreadyAnswered reports whether a recovered request's answer or failure
// is already in S3 (mce died between writing it and marking the request
// done); if so it marks the request done.
func (s *Server) alreadyAnswered(it *asyncItem) bool {
	for _, url := range []string{it.rec.Output, it.rec.Failure} {
		if !s.asyncOutputAllowed(url) {
			continue
		}
		meta, err := s.cfg.AsyncObjects.ObjectMetadata(s.ctx, url)
		if err == nil && meta[metaRequest] == it.rec.Key {
			s.forget(it)
			s.log.Info().Str("endpoint", it.rec.Endpoint).Str("inference_id", it.rec.InferenceID).Str("request", it.rec.Key).
				Str("location", url).Msg("async request was answered before the restart")
			return true
		}
	}
	return false
}

// forget marks a request done in the store.
func (s *Server) forget(it *asyncItem) {
	if err := s.store.DeleteBatched(store.AsyncRequests, it.rec.Key); err != nil {
		s.log.Error().Err(err).Str("request", it.rec.Key).Msg("could not mark the async request done; it will be answered again after a restart")
	}
}

// recoverAsync queues again every request the store holds, oldest first.
// Call it after the endpoints are back in the registry.
func (s *Server) recoverAsync() error {
	var recs []asyncRecord
	if err := store.List(s.store, store.AsyncRequests, func(r asyncRecord) error { recs = append(recs, r); return nil }); err != nil {
		return fmt.Errorf("read queued async requests from the state: %w", err)
	}
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].Accepted.Equal(recs[j].Accepted) {
			return recs[i].Accepted.Before(recs[j].Accepted)
		}
		return recs[i].Key < recs[j].Key
	})
	if len(recs) > 0 && s.cfg.AsyncObjects == nil {
		return fmt.Errorf("the state holds %d queued async requests, but mce has no S3 access to answer them", len(recs))
	}
	for _, r := range recs {
		s.enqueue(&asyncItem{rec: r, recovered: true})
	}
	if len(recs) > 0 {
		s.log.Info().Int("requests", len(recs)).Msg("async requests queued again after a restart")
	}
	return nil
}
