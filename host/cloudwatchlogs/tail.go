package cloudwatchlogs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/internal/wire"
)

// Container logs: GET /mce/endpoints/{EndpointName}/logs streams the output
// of an endpoint's containers (mce logs). SageMaker keeps that output in
// CloudWatch Logs, log group /aws/sagemaker/Endpoints/<EndpointName>, one
// stream per variant instance, so the call is authorized as CloudWatch's
// logs:FilterLogEvents (what `aws logs tail` calls) on the log group's ARN,
// arn:aws:logs:<region>:<account>:log-group:/aws/sagemaker/Endpoints/<name>:*.
//
// Query parameters: container (a ContainerHostname), variant (a
// VariantName), tail (history lines per container, 0 to 10000, default
// 100), follow (true: keep streaming new lines). The answer is JSON lines
// (application/x-ndjson), one LogEvent each.
//
// A follow ends when the client goes away, when mce shuts down, or when
// every container followed is removed (the endpoint is deleted or updated
// to a new generation). A client that reads slowly misses lines (each
// container's output is never held up for it): the next line it gets
// carries the count in Dropped. A client that stops reading altogether is
// cut off after logWriteTimeout.

// HeaderLogContainers names, in the answer of the logs call, how many
// containers its lines come from.
const HeaderLogContainers = "X-Mce-Log-Containers"

// ActionLogs is the IAM action GET /mce/endpoints/{name}/logs is authorized as.
const ActionLogs = "logs:FilterLogEvents"

// LogEvent is one line of container output in the answer of the logs call.
type LogEvent struct {
	Variant   string `json:"Variant"`
	Copy      int    `json:"Copy"`
	Container string `json:"Container"`
	Stream    string `json:"Stream"` // stdout or stderr
	Message   string `json:"Message"`
	// History is true for lines printed before the call (tail), false for
	// lines followed as they come.
	History bool `json:"History,omitempty"`
	// Dropped counts the lines of this container the caller missed just
	// before this one because it read too slowly.
	Dropped int `json:"Dropped,omitempty"`
}

const (
	defaultLogTail = 100
	// logFollowBuffer is how many lines of one container wait for a
	// follower before lines are dropped. With maxFollowers, it bounds the
	// memory followers hold: lines are at most 16 KiB, so at worst
	// maxFollowers × containers × 64 × 16 KiB (1 MiB per container
	// followed: 15 MiB per follower of a 15-container endpoint, plus the
	// follower's merged queue of 64 lines), and usually far less.
	logFollowBuffer = 64
	// maxFollowers is the most follows served at once; beyond, the call is
	// refused with 503 ServiceUnavailable.
	maxFollowers = 32
	// logWriteTimeout cuts off a follower that accepts no bytes for this long.
	logWriteTimeout = 30 * time.Second
)

type logTarget struct {
	variant, host string
	copy          int
	src           Source
}

// Tail serves GET /mce/endpoints/{name}/logs, deciding with decide (the
// host has set the request ID). endpoint is the endpoint's name as
// created once the call is authorized, for the host's access log; "" before.
func (s *Service) Tail(w http.ResponseWriter, r *http.Request, name string, decide Decide) (endpoint string) {
	q := r.URL.Query()
	host, variant := q.Get("container"), q.Get("variant")
	tail := defaultLogTail
	follow := false
	switch {
	case len(name) > 63 || !wire.ValidName(name):
		apierr.Write(w, apierr.ValidationException("Could not find endpoint %q.", spec.ARN(s.o.Region, s.o.Account, spec.KindEndpoint, apierr.Printable(name))))
		return ""
	case host != "" && (len(host) > 63 || !wire.ValidName(host)):
		apierr.Write(w, apierr.ValidationException("container %q: want a ContainerHostname (letters, digits and dashes, at most 63).", apierr.Printable(host)))
		return ""
	case variant != "" && (len(variant) > 63 || !wire.ValidName(variant)):
		apierr.Write(w, apierr.ValidationException("variant %q: want a VariantName (letters, digits and dashes, at most 63).", apierr.Printable(variant)))
		return ""
	}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > containers.MaxLogTail {
			apierr.Write(w, apierr.ValidationException("tail %q: want a number of lines from 0 to %d.", apierr.Printable(v), containers.MaxLogTail))
			return ""
		}
		tail = n
	}
	if v := q.Get("follow"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			apierr.Write(w, apierr.ValidationException("follow %q: want true or false.", apierr.Printable(v)))
			return ""
		}
		follow = b
	}
	g, name := s.group(name)
	if api := decide(r.Context(), ActionLogs, s.groupARN(name)); api != nil {
		apierr.Write(w, api)
		return ""
	}
	targets, api := s.logTargets(g, name, variant, host)
	if api != nil {
		apierr.Write(w, api)
		return name
	}

	// Followers subscribe before the history is read: a line printed in
	// between may show twice, but none is lost.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if s.o.Streams != nil {
		stop := context.AfterFunc(s.o.Streams, cancel)
		defer stop()
	}
	type followed struct {
		t     logTarget
		lines <-chan containers.LogLine
		done  <-chan struct{}
	}
	var subs []followed
	if follow {
		if s.followers.Add(1) > maxFollowers {
			s.followers.Add(-1)
			apierr.Write(w, &apierr.Error{Status: http.StatusServiceUnavailable, Code: apierr.CodeServiceUnavail,
				Message: fmt.Sprintf("mce already serves %d log follows, its most; try again when one ends.", maxFollowers)})
			return name
		}
		defer s.followers.Add(-1)
		for _, t := range targets {
			lines, done, unsubscribe := t.src.Follow(logFollowBuffer)
			defer unsubscribe()
			subs = append(subs, followed{t, lines, done})
		}
	}

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set(HeaderLogContainers, strconv.Itoa(len(targets)))
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	send := func(ev LogEvent) error {
		rc.SetWriteDeadline(time.Now().Add(logWriteTimeout))
		return enc.Encode(ev)
	}
	for _, t := range targets {
		err := t.src.Logs(ctx, tail, func(l containers.LogLine) error {
			return send(LogEvent{Variant: t.variant, Copy: t.copy, Container: t.host, Stream: l.Stream, Message: l.Text, History: true})
		})
		if err != nil {
			if ctx.Err() != nil {
				return name
			}
			// The engine's history is missing (the container is being
			// recreated); say so in the stream and go on.
			s.log.Debug().Err(err).Str("endpoint", name).Str("container", t.host).Msg("reading container logs")
			if send(LogEvent{Variant: t.variant, Copy: t.copy, Container: t.host, Stream: "mce", History: true,
				Message: "mce could not read this container's earlier output: " + apierr.RedactPaths(err.Error())}) != nil {
				return name
			}
		}
	}
	rc.Flush()
	if !follow {
		return name
	}

	// One forwarder per container into a small merged queue; a forwarder
	// waits for the writer, and meanwhile its container's lines beyond the
	// follow buffer are dropped and counted.
	merged := make(chan LogEvent, 64)
	forward := func(t logTarget, l containers.LogLine) bool {
		select {
		case merged <- LogEvent{Variant: t.variant, Copy: t.copy, Container: t.host, Stream: l.Stream, Message: l.Text, Dropped: l.Dropped}:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var wg sync.WaitGroup
	for _, f := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case <-f.done:
					// Removed: pass on what it printed last, then end.
					for {
						select {
						case l := <-f.lines:
							if !forward(f.t, l) {
								return
							}
						default:
							return
						}
					}
				case l := <-f.lines:
					if !forward(f.t, l) {
						return
					}
				}
			}
		}()
	}
	allDone := make(chan struct{})
	go func() {
		wg.Wait()
		close(allDone)
	}()
	defer func() {
		cancel()
		<-allDone
	}()
	for {
		select {
		case <-ctx.Done():
			return name
		case <-allDone:
			// Every container followed is gone; what was queued still goes out.
			for {
				select {
				case ev := <-merged:
					if send(ev) != nil {
						return name
					}
				default:
					rc.Flush()
					return name
				}
			}
		case ev := <-merged:
			if err := send(ev); err != nil {
				return name
			}
			if len(merged) == 0 {
				if rc.Flush() != nil {
					return name
				}
			}
		}
	}
}

// logTargets lists the containers of an endpoint whose logs are asked for,
// in variant, copy and chain order.
func (s *Service) logTargets(g Group, name, variant, host string) ([]logTarget, *apierr.Error) {
	if g == nil {
		return nil, apierr.ValidationException("Could not find endpoint %q.", spec.ARN(s.o.Region, s.o.Account, spec.KindEndpoint, name))
	}
	cs := g.Containers()
	if !cs.Running {
		return nil, apierr.ValidationException("Endpoint %s has no running containers (its status is %s): container logs are read from running containers.", name, cs.Status)
	}
	var out []logTarget
	knownVariant, knownHost := variant == "", host == ""
	for _, v := range cs.Variants {
		if variant != "" && v == variant {
			knownVariant = true
		}
	}
	for _, c := range cs.List {
		if variant != "" && c.Variant != variant || host != "" && c.Host != host {
			continue
		}
		knownHost = true
		if c.Source != nil {
			out = append(out, logTarget{variant: c.Variant, copy: c.Copy, host: c.Host, src: c.Source})
		}
	}
	switch {
	case !knownVariant:
		return nil, apierr.ValidationException("Endpoint %s has no variant %s.", name, variant)
	case !knownHost && variant != "":
		return nil, apierr.ValidationException("Variant %s of endpoint %s has no container %s.", variant, name, host)
	case !knownHost:
		return nil, apierr.ValidationException("Endpoint %s has no container %s.", name, host)
	case len(out) == 0:
		return nil, apierr.ValidationException("The containers of endpoint %s keep no logs mce can read.", name)
	}
	return out, nil
}
