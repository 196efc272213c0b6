package authz

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rs/zerolog"
)

// The decision log is bounded, because what it holds comes from callers
// who may be neither authenticated nor allowed anything (an unsigned
// AddTags of 20,000 tags was logged whole: 937 KiB a line, 18 MiB in 9 s
// from one client).
//
// A line holds at most logMaxContextKeys condition keys (the first in
// sorted order; "context_omitted" counts the rest), key names of at most
// logMaxKeyLen bytes, values of at most logMaxValueLen bytes and at most
// logMaxMultiValues values of multi-valued keys together; the action,
// resource, principal and access key ID at most logMaxField bytes. A value
// cut short ends with "…[+N bytes]", a list cut short with "…[+N values]";
// control characters become '?'. So a line stays under 16 KiB, whatever the
// request.
//
// Denials (and evaluation errors) are also limited in number: for each
// client and reason — principal, source address and what decided
// ("implicit-deny", a statement, "error") — the first
// Config.DenialLogBurst denials of a window of Config.DenialLogWindow are
// logged in full, and at most 20 times that from all clients together;
// the denials beyond are counted, and when the window ends one line
// ("authz denials suppressed") says how many more there were, with the
// client, the reason and the last action. Failed authentications
// (Authenticate) are limited the same way, by access key ID, address and
// error code. Allowed decisions are all logged (bounded in size): they
// come from callers the policies let in.
const (
	logMaxContextKeys = 32
	logMaxKeyLen      = 128
	logMaxValueLen    = 256
	logMaxMultiValues = 32
	logMaxField       = 2048

	defaultDenialLogBurst  = 5
	defaultDenialLogWindow = time.Minute
	denialLogGlobalFactor  = 20   // all clients together: this times the burst a window
	denialLogMaxClients    = 1000 // windows tracked at once; beyond, they share one
)

// logValue bounds a caller-supplied value for a log line: at most max
// bytes (cut at a character boundary, then "…[+N bytes]"), control and
// other non-printable characters replaced with '?'.
func logValue(v string, max int) string {
	clean := len(v) <= max
	for i := 0; clean && i < len(v); i++ {
		clean = v[i] >= 0x20 && v[i] < 0x7f
	}
	if clean {
		return v // the common case: short printable ASCII, no copy
	}
	rest := 0
	if len(v) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v, rest = v[:cut], len(v)-cut
	}
	v = strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(v, "?"))
	if rest > 0 {
		v += "…[+" + strconv.Itoa(rest) + " bytes]"
	}
	return v
}

// logDecision writes the decision log line (constant keys, bounded size);
// a denial only when the denial limiter lets it.
func (a *Authorizer) logDecision(level zerolog.Level, in Input, d Decision, cached bool, err error) {
	e := a.log.WithLevel(level)
	if e == nil {
		return
	}
	principal := in.Principal.ARN
	if in.Principal.Anonymous || principal == "" {
		principal = "anonymous"
	}
	principal = logValue(principal, logMaxField)
	action := logValue(in.Action, logMaxField)
	if !d.Allowed && !a.denials.admit(denialKey{"decision", principal, logValue(in.SourceIP, logMaxKeyLen), logValue(d.By, logMaxKeyLen)}, action) {
		e.Discard()
		return
	}
	keys := make([]string, 0, len(in.Context))
	for k := range in.Context {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	omitted := 0
	if len(keys) > logMaxContextKeys {
		omitted, keys = len(keys)-logMaxContextKeys, keys[:logMaxContextKeys]
	}
	ctxDict := zerolog.Dict()
	for _, k := range keys {
		ctxDict.Str(logValue(k, logMaxKeyLen), logValue(in.Context[k], logMaxValueLen))
	}
	multi := make([]string, 0, len(in.MultiContext))
	for k := range in.MultiContext {
		multi = append(multi, k)
	}
	sort.Strings(multi)
	room := logMaxMultiValues
	for i, k := range multi {
		if len(keys)+i >= logMaxContextKeys {
			omitted += len(multi) - i
			break
		}
		vs := in.MultiContext[k]
		shown := make([]string, 0, min(len(vs), room)+1)
		for _, v := range vs[:min(len(vs), room)] {
			shown = append(shown, logValue(v, logMaxValueLen))
		}
		if n := len(vs) - len(shown); n > 0 {
			shown = append(shown, "…[+"+strconv.Itoa(n)+" values]")
		}
		room -= min(len(vs), room)
		ctxDict.Strs(logValue(k, logMaxKeyLen), shown)
	}
	e.Str("principal", principal).
		Str("access_key_id", logValue(in.Principal.AccessKeyID, logMaxKeyLen)).
		Str("action", action).
		Str("resource", logValue(in.Resource, logMaxField)).
		Dict("context", ctxDict)
	if omitted > 0 {
		e.Int("context_omitted", omitted)
	}
	e.Str("source_ip", logValue(in.SourceIP, logMaxKeyLen)).
		Bool("allowed", d.Allowed).
		Bool("explicit_deny", d.ExplicitDeny).
		Str("by", logValue(d.By, logMaxField)).
		Bool("cached", cached)
	if err != nil {
		e.Str("error", logValue(err.Error(), logMaxField))
	}
	e.Msg("authz decision")
}

// logAuthFailure writes the line of a failed authentication, bounded and
// limited as denials are.
func (a *Authorizer) logAuthFailure(accessKeyID, remoteAddr, code, msg string) {
	e := a.log.Info()
	if e == nil {
		return
	}
	key, addr := logValue(accessKeyID, logMaxKeyLen), logValue(remoteAddr, logMaxKeyLen)
	ip := addr
	if i := strings.LastIndexByte(addr, ':'); i > 0 {
		ip = strings.Trim(addr[:i], "[]") // the address without its port: one client
	}
	if !a.denials.admit(denialKey{"authentication", key, ip, logValue(code, logMaxKeyLen)}, "") {
		e.Discard()
		return
	}
	e.Str("access_key_id", key).Str("code", logValue(code, logMaxKeyLen)).Str("remote_addr", addr).Msg(msg)
}

// denialKey is one client and reason of the denial limiter.
type denialKey struct {
	kind      string // "decision" or "authentication"
	principal string // or the access key ID of a failed authentication
	source    string // source IP
	reason    string // what decided, or the authentication error's code
}

// denialWindow counts one key's denials in its window.
type denialWindow struct {
	logged, suppressed int
	lastAction         string
}

// denialLog limits the log lines of denials; safe for concurrent use.
type denialLog struct {
	log    zerolog.Logger
	burst  int
	window time.Duration

	mu           sync.Mutex
	keys         map[denialKey]*denialWindow
	globalStart  time.Time
	globalLogged int
}

func newDenialLog(log zerolog.Logger, burst int, window time.Duration) *denialLog {
	if burst <= 0 {
		burst = defaultDenialLogBurst
	}
	if window <= 0 {
		window = defaultDenialLogWindow
	}
	return &denialLog{log: log, burst: burst, window: window, keys: map[denialKey]*denialWindow{}}
}

// admit reports whether a denial of key may be logged now; one that may
// not is counted, and told when its window ends.
func (l *denialLog) admit(k denialKey, action string) bool {
	if l == nil {
		return true
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.keys[k]
	if w == nil && len(l.keys) >= denialLogMaxClients {
		k = denialKey{kind: k.kind, principal: "*", source: "*", reason: "*"} // many clients at once: together
		w = l.keys[k]
	}
	if w == nil {
		w = &denialWindow{}
		l.keys[k] = w
		time.AfterFunc(l.window, func() { l.end(k) })
	}
	if now.Sub(l.globalStart) >= l.window {
		l.globalStart, l.globalLogged = now, 0
	}
	if w.logged < l.burst && l.globalLogged < l.burst*denialLogGlobalFactor {
		w.logged++
		l.globalLogged++
		return true
	}
	w.suppressed++
	if action != "" {
		w.lastAction = action
	}
	return false
}

// end closes key k's window, saying how many denials it left out.
func (l *denialLog) end(k denialKey) {
	l.mu.Lock()
	w := l.keys[k]
	delete(l.keys, k)
	l.mu.Unlock()
	if w == nil || w.suppressed == 0 {
		return
	}
	what := "authz denials"
	if k.kind == "authentication" {
		what = "failed authentications"
	}
	e := l.log.Info().Str("event", "authz_suppressed").Str("kind", k.kind)
	if k.kind == "authentication" {
		e.Str("access_key_id", k.principal).Str("remote_ip", k.source).Str("code", k.reason)
	} else {
		e.Str("principal", k.principal).Str("source_ip", k.source).Str("by", k.reason)
	}
	if w.lastAction != "" {
		e.Str("last_action", w.lastAction)
	}
	e.Int("logged", w.logged).Int("suppressed", w.suppressed).Float64("window_s", l.window.Seconds()).
		Msgf("%d more %s like this in the last %s were not logged", w.suppressed, what, l.window)
}
