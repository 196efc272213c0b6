package cloudwatchlogs

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/internal/wire"
)

// A subset of the CloudWatch Logs API (awsJson1_1, X-Amz-Target
// Logs_20140328.*, signed for service "logs") over endpoints' container
// output, so that `aws logs tail /aws/sagemaker/Endpoints/NAME
// --endpoint-url http://127.0.0.1:8080` and boto3's logs client work as
// against SageMaker's log groups: FilterLogEvents, GetLogEvents and
// DescribeLogStreams.
//
// Each endpoint is the log group /aws/sagemaker/Endpoints/<EndpointName>;
// each running container a log stream <VariantName>/<copy>/<ContainerHostname>.
// Events come from the engine's log of the containers running now (what a
// removed or recreated container printed is gone), with the engine's
// timestamps. filterPattern is refused (not implemented). Calls are
// authorized as logs:<Operation> on the log group's ARN (GetLogEvents: the
// log stream's), as in IAM.

const (
	logGroupPrefix = "/aws/sagemaker/Endpoints/"
	// maxEventsBytes bounds the events of one answer, as CloudWatch's 1 MB.
	maxEventsBytes = 1 << 20
	maxEventsLimit = 10000
	// CloudWatch Logs error codes.
	codeLogsResourceNotFound = "ResourceNotFoundException"
	codeInvalidParameter     = "InvalidParameterException"
	// amzJSON11 is the Content-Type of awsJson1_1 answers.
	amzJSON11 = "application/x-amz-json-1.1"
)

// logsInput holds the members mce reads of the three operations' inputs.
type logsInput struct {
	LogGroupName        *string  `json:"logGroupName"`
	LogGroupIdentifier  *string  `json:"logGroupIdentifier"`
	LogStreamName       *string  `json:"logStreamName"`
	LogStreamNames      []string `json:"logStreamNames"`
	LogStreamNamePrefix *string  `json:"logStreamNamePrefix"`
	StartTime           *int64   `json:"startTime"`
	EndTime             *int64   `json:"endTime"`
	Limit               *int     `json:"limit"`
	NextToken           *string  `json:"nextToken"`
	FilterPattern       *string  `json:"filterPattern"`
	StartFromHead       *bool    `json:"startFromHead"`
	OrderBy             *string  `json:"orderBy"`
	Descending          *bool    `json:"descending"`
}

type logsEvent struct {
	LogStreamName string `json:"logStreamName,omitempty"`
	Timestamp     int64  `json:"timestamp"`
	Message       string `json:"message"`
	IngestionTime int64  `json:"ingestionTime"`
	EventID       string `json:"eventId,omitempty"`

	at   time.Time // the engine's timestamp, to the nanosecond
	size int
}

// logsOperations are Operations.
var logsOperations = []string{"FilterLogEvents", "GetLogEvents", "DescribeLogStreams"}

// Operations are the CloudWatch Logs operations mce answers, each
// authorized as logs:<operation> on the endpoint's log group or stream.
func Operations() []string { return slices.Clone(logsOperations) }

// Action is the IAM action of the CloudWatch Logs operation op
// (logs:<op>), or the error for an operation mce does not answer.
func Action(op string) (string, *apierr.Error) {
	if !slices.Contains(logsOperations, op) {
		return "", logsError(http.StatusBadRequest, apierr.CodeUnknownOperation,
			"mce answers the CloudWatch Logs operations FilterLogEvents, GetLogEvents and DescribeLogStreams on endpoints' log groups, not %s.", apierr.Printable(op))
	}
	return "logs:" + op, nil
}

// Call answers one CloudWatch Logs call: op is the X-Amz-Target after
// Logs_20140328., body the request's body, which the host read and whose
// signature it checked, and decide the caller's decisions (the host has
// set the request ID). endpoint is the endpoint whose log group the call
// names, once known, for the host's access log; err is a failure of mce's
// own, not yet written (the host answers it as an internal error).
func (s *Service) Call(w http.ResponseWriter, r *http.Request, op string, body []byte, decide Decide) (endpoint string, err error) {
	action, api := Action(op)
	if api != nil {
		apierr.Write(w, api)
		return "", nil
	}
	var in logsInput
	if err := json.Unmarshal(body, &in); err != nil {
		apierr.Write(w, logsError(http.StatusBadRequest, "SerializationException", "The request body is not a JSON object of %s's input.", op))
		return "", nil
	}
	group := ""
	switch {
	case in.LogGroupName != nil:
		group = *in.LogGroupName
	case in.LogGroupIdentifier != nil:
		group = *in.LogGroupIdentifier
	}
	endpoint, ok := strings.CutPrefix(group, logGroupPrefix)
	if !ok || len(endpoint) > 63 || !wire.ValidName(endpoint) {
		apierr.Write(w, logsError(http.StatusBadRequest, codeLogsResourceNotFound,
			"The specified log group does not exist (mce has the log groups %s<EndpointName> of its endpoints).", logGroupPrefix))
		return "", nil
	}
	g, endpoint := s.group(endpoint)
	resource := s.groupARN(endpoint)
	if op == "GetLogEvents" {
		if in.LogStreamName == nil || *in.LogStreamName == "" {
			apierr.Write(w, logsError(http.StatusBadRequest, codeInvalidParameter, "logStreamName is required."))
			return endpoint, nil
		}
		resource = s.streamARN(endpoint, *in.LogStreamName)
	}
	if api := decide(r.Context(), action, resource); api != nil {
		apierr.Write(w, api)
		return endpoint, nil
	}
	if in.FilterPattern != nil && *in.FilterPattern != "" {
		apierr.Write(w, logsError(http.StatusBadRequest, codeInvalidParameter, "mce does not implement filterPattern; filter the events on your side."))
		return endpoint, nil
	}
	limit := maxEventsLimit
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > maxEventsLimit {
			apierr.Write(w, logsError(http.StatusBadRequest, codeInvalidParameter, "limit must be from 1 to %d.", maxEventsLimit))
			return endpoint, nil
		}
		limit = *in.Limit
	}
	streams, created, api := s.logStreams(g, endpoint)
	if api != nil {
		apierr.Write(w, api)
		return endpoint, nil
	}
	var out any
	switch op {
	case "DescribeLogStreams":
		out, api = s.describeLogStreams(endpoint, streams, created, in, limit)
	case "FilterLogEvents":
		out, api = filterLogEvents(r.Context(), streams, in, limit)
	case "GetLogEvents":
		out, api = getLogEvents(r.Context(), streams, in, limit)
	}
	if api != nil {
		apierr.Write(w, api)
		return endpoint, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return endpoint, err
	}
	w.Header().Set("Content-Type", amzJSON11)
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	return endpoint, nil
}

// logStream is one container as a CloudWatch log stream.
type logStream struct {
	name string
	src  Source
}

// logStreams lists an endpoint's log streams, and says when they were
// created (with the endpoint): none while it has no running containers;
// ResourceNotFound for an unknown endpoint.
func (s *Service) logStreams(g Group, endpoint string) ([]logStream, time.Time, *apierr.Error) {
	if g == nil {
		return nil, time.Time{}, logsError(http.StatusBadRequest, codeLogsResourceNotFound, "The specified log group does not exist: mce has no endpoint %s.", endpoint)
	}
	cs := g.Containers()
	var out []logStream
	for _, c := range cs.List {
		if c.Source != nil {
			out = append(out, logStream{name: fmt.Sprintf("%s/%d/%s", c.Variant, c.Copy, c.Host), src: c.Source})
		}
	}
	return out, cs.Created, nil
}

func (s *Service) describeLogStreams(endpoint string, streams []logStream, created time.Time, in logsInput, limit int) (any, *apierr.Error) {
	if in.OrderBy != nil && *in.OrderBy != "LogStreamName" {
		return nil, logsError(http.StatusBadRequest, codeInvalidParameter, "mce orders log streams by LogStreamName only.")
	}
	type stream struct {
		Name         string `json:"logStreamName"`
		Arn          string `json:"arn"`
		CreationTime int64  `json:"creationTime"`
	}
	var list []stream
	for _, st := range streams {
		if in.LogStreamNamePrefix != nil && !strings.HasPrefix(st.name, *in.LogStreamNamePrefix) {
			continue
		}
		list = append(list, stream{Name: st.name, Arn: s.streamARN(endpoint, st.name), CreationTime: created.UnixMilli()})
	}
	slices.SortFunc(list, func(a, b stream) int { return strings.Compare(a.Name, b.Name) })
	if in.Descending != nil && *in.Descending {
		slices.Reverse(list)
	}
	if limit > 50 {
		limit = 50 // DescribeLogStreams' own maximum
	}
	if len(list) > limit {
		list = list[:limit]
	}
	return map[string]any{"logStreams": append([]stream{}, list...)}, nil
}

// cursor is a position in an endpoint's merged events: after the event at
// ns with eventId id. Tokens are its opaque encoding.
type cursor struct {
	ns int64
	id string
}

func (c cursor) token(prefix string) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(c.ns))
	return prefix + base64.RawURLEncoding.EncodeToString(append(b, c.id...))
}

func parseCursor(tok, prefix string) (cursor, bool) {
	raw, ok := strings.CutPrefix(tok, prefix)
	if !ok {
		return cursor{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || len(b) < 8 || len(b) > 8+64 {
		return cursor{}, false
	}
	return cursor{ns: int64(binary.BigEndian.Uint64(b)), id: string(b[8:])}, true
}

// before reports whether ev comes after the cursor (events are ordered by
// time, then eventId).
func (c cursor) before(ev *logsEvent) bool {
	ns := ev.at.UnixNano()
	return ns > c.ns || ns == c.ns && ev.EventID > c.id
}

func eventID(stream string, at time.Time, n int) string {
	h := sha256.Sum256([]byte(stream))
	return strconv.FormatInt(at.UnixNano(), 10) + "-" + hex.EncodeToString(h[:6]) + "-" + strconv.Itoa(n)
}

var errEnough = errors.New("enough events")

// streamEvents calls fn with each of a stream's events in [since, until),
// oldest first; events of the same engine timestamp are numbered in order,
// so their eventIds are distinct and stable across reads. It stops at fn's
// first error, which it returns.
func streamEvents(ctx context.Context, st logStream, since, until time.Time, fn func(*logsEvent) error) error {
	last, n := time.Time{}, 0
	return st.src.LogsBetween(ctx, since, until, func(l containers.LogLine) error {
		if l.Time.IsZero() {
			return nil
		}
		if l.Time.Equal(last) {
			n++
		} else {
			last, n = l.Time, 0
		}
		if !until.IsZero() && !l.Time.Before(until) {
			return nil
		}
		return fn(&logsEvent{LogStreamName: st.name, Timestamp: l.Time.UnixMilli(), IngestionTime: l.Time.UnixMilli(),
			Message: l.Text, EventID: eventID(st.name, l.Time, n), at: l.Time, size: len(l.Text) + 26})
	})
}

// readEvents reads a stream's events in [since, until), after cur, at most
// limit and about maxEventsBytes.
func readEvents(ctx context.Context, st logStream, since, until time.Time, cur cursor, limit int) ([]*logsEvent, bool, error) {
	var out []*logsEvent
	bytes, more := 0, false
	err := streamEvents(ctx, st, since, until, func(ev *logsEvent) error {
		if !cur.before(ev) {
			return nil
		}
		if len(out) >= limit || bytes+ev.size > maxEventsBytes {
			more = true
			return errEnough
		}
		bytes += ev.size
		out = append(out, ev)
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return out, more, err
}

// readLastEvents reads a stream's events in [since, until) and returns the
// last limit of them, at most about maxEventsBytes; memory stays within
// that bound however long the window.
func readLastEvents(ctx context.Context, st logStream, since, until time.Time, limit int) ([]*logsEvent, error) {
	var out []*logsEvent
	size := 0
	err := streamEvents(ctx, st, since, until, func(ev *logsEvent) error {
		out = append(out, ev)
		size += ev.size
		for len(out) > limit || size > maxEventsBytes {
			size -= out[0].size
			out[0] = nil
			out = out[1:]
		}
		return nil
	})
	return out, err
}

func msTime(ms *int64) time.Time {
	if ms == nil || *ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(*ms)
}

func filterLogEvents(ctx context.Context, streams []logStream, in logsInput, limit int) (any, *apierr.Error) {
	if len(in.LogStreamNames) > 0 && in.LogStreamNamePrefix != nil {
		return nil, logsError(http.StatusBadRequest, codeInvalidParameter, "logStreamNames and logStreamNamePrefix cannot both be given.")
	}
	since, until := msTime(in.StartTime), msTime(in.EndTime)
	cur := cursor{ns: -1 << 62}
	if in.NextToken != nil {
		c, ok := parseCursor(*in.NextToken, "f/")
		if !ok {
			return nil, logsError(http.StatusBadRequest, codeInvalidParameter, "The nextToken is not one mce gave.")
		}
		cur = c
		if t := time.Unix(0, c.ns); t.After(since) {
			since = t
		}
	}
	type searched struct {
		Name     string `json:"logStreamName"`
		Complete bool   `json:"searchedCompletely"`
	}
	var all []*logsEvent
	var seen []searched
	for _, st := range streams {
		if len(in.LogStreamNames) > 0 && !slices.Contains(in.LogStreamNames, st.name) ||
			in.LogStreamNamePrefix != nil && !strings.HasPrefix(st.name, *in.LogStreamNamePrefix) {
			continue
		}
		evs, m, err := readEvents(ctx, st, since, until, cur, limit)
		if err != nil && ctx.Err() != nil {
			return nil, logsError(http.StatusBadRequest, codeInvalidParameter, "The request was cancelled.")
		}
		all = append(all, evs...)
		seen = append(seen, searched{Name: st.name, Complete: err == nil && !m})
	}
	slices.SortFunc(all, func(a, b *logsEvent) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.EventID, b.EventID)
	})
	size := 0
	for i, ev := range all {
		if i >= limit || size+ev.size > maxEventsBytes {
			all = all[:i]
			break
		}
		size += ev.size
	}
	out := map[string]any{"events": nonNil(all), "searchedLogStreams": nonNil(seen)}
	// As CloudWatch Logs pages a live log group: a page with events always
	// carries a nextToken (after its last event; more may be there now or
	// come later), and the page that finds nothing after the token ends
	// the paging by carrying none. Clients that follow a group (the
	// SageMaker SDK's live logging, which prints only pages with a token)
	// need the token on every page of events.
	if len(all) > 0 {
		last := all[len(all)-1]
		out["nextToken"] = cursor{ns: last.at.UnixNano(), id: last.EventID}.token("f/")
	}
	return out, nil
}

// getLogEvents reads one stream: from the head (startFromHead, paging
// forward with nextForwardToken; the token comes back unchanged at the end,
// which is how clients know to stop) or the last limit events.
func getLogEvents(ctx context.Context, streams []logStream, in logsInput, limit int) (any, *apierr.Error) {
	i := slices.IndexFunc(streams, func(st logStream) bool { return st.name == *in.LogStreamName })
	if i < 0 {
		return nil, logsError(http.StatusBadRequest, codeLogsResourceNotFound, "The specified log stream does not exist.")
	}
	st := streams[i]
	since, until := msTime(in.StartTime), msTime(in.EndTime)
	cur := cursor{ns: -1 << 62}
	fromHead := in.StartFromHead != nil && *in.StartFromHead
	token := ""
	if in.NextToken != nil {
		token = *in.NextToken
		switch c, ok := parseCursor(token, "f/"); {
		case ok:
			cur, fromHead = c, true
			if t := time.Unix(0, c.ns); t.After(since) {
				since = t
			}
		case strings.HasPrefix(token, "b/"):
			// Nothing lies before the first page mce gives.
			return map[string]any{"events": []logsEvent{}, "nextForwardToken": token, "nextBackwardToken": token}, nil
		default:
			return nil, logsError(http.StatusBadRequest, codeInvalidParameter, "The nextToken is not one mce gave.")
		}
	}
	var evs []*logsEvent
	if fromHead {
		var err error
		evs, _, err = readEvents(ctx, st, since, until, cur, limit)
		if err != nil && ctx.Err() != nil {
			return nil, logsError(http.StatusBadRequest, codeInvalidParameter, "The request was cancelled.")
		}
	} else {
		// The last limit events (and at most about 1 MB of them): the
		// window is read through, keeping only its end.
		var err error
		evs, err = readLastEvents(ctx, st, since, until, limit)
		if err != nil && ctx.Err() != nil {
			return nil, logsError(http.StatusBadRequest, codeInvalidParameter, "The request was cancelled.")
		}
	}
	events := make([]logsEvent, len(evs))
	for j, ev := range evs {
		events[j] = logsEvent{Timestamp: ev.Timestamp, Message: ev.Message, IngestionTime: ev.IngestionTime}
	}
	forward, backward := token, token
	if len(evs) > 0 {
		last := evs[len(evs)-1]
		forward = cursor{ns: last.at.UnixNano(), id: last.EventID}.token("f/")
		backward = cursor{ns: evs[0].at.UnixNano(), id: evs[0].EventID}.token("b/")
	}
	if forward == "" {
		forward = cur.token("f/")
		backward = "b/" + strings.TrimPrefix(forward, "f/")
	}
	return map[string]any{"events": events, "nextForwardToken": forward, "nextBackwardToken": backward}, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
