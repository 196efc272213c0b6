package authz

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Principal is who made a request. Anonymous callers (unsigned requests, or
// every caller when no credentials file is configured) have Anonymous set
// and no ARN.
type Principal struct {
	ARN         string
	AccessKeyID string
	Username    string // aws:username; IAM users only
	Anonymous   bool
}

// Config says where the policies are. The zero value is allow-all with no
// signature checks.
type Config struct {
	// CredentialsFile maps access keys to principals and their policies
	// (format in doc.go). Empty: signatures are not verified and every
	// caller is anonymous.
	CredentialsFile string
	// PoliciesFile holds named IAM policies and their attachments to
	// principals (format in doc.go). Optional.
	PoliciesFile string
	// RegoPaths are custom Rego files or directories (package mce.custom;
	// *_test.rego files are skipped). Optional.
	RegoPaths []string
	// Region, when set, is the only region a SigV4 credential scope may name.
	Region string
	// ClockSkew is the largest distance allowed between X-Amz-Date and now.
	// Zero means 15 minutes, as AWS.
	ClockSkew time.Duration
	// Logger receives the decision log (info) and reloads. Zero: no logs.
	Logger zerolog.Logger
	// DenialLogBurst is how many denials (and failed authentications) of
	// one client and reason are logged in full each DenialLogWindow; the
	// others are counted, and told in one line when the window ends (see
	// decisionlog.go). Zero means 5 and one minute.
	DenialLogBurst  int
	DenialLogWindow time.Duration
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// DecisionCache is how many IAM decisions each policy generation
	// remembers, keyed by everything the principal's statements can read
	// (policy set, action, resource, the condition keys they name). Zero
	// means 10,000; negative disables the cache. Decisions involving custom
	// Rego are never cached. Every decision is logged, cached or not.
	DecisionCache int
	// ExtraConditionKeys are single-valued condition keys, beyond mce's
	// own (see checkConditionKeys), that the program embedding the
	// authorizer fills in Input.Context. A policy naming any other key
	// is refused at load: mce would never set it.
	ExtraConditionKeys []string
	// Targets, when not nil, is every action the embedding program
	// authorizes and the resources it authorizes it on: a statement that
	// can never apply is reported (Warnings, and a warning in the log at
	// each load).
	Targets Targets
	// ReloadSettle is how long Reload waits, once it has read the files,
	// before reading them again to check that none changed meanwhile (a
	// file being written is applied only once complete). Zero means 250
	// ms. Rewrite files by writing a new file and renaming it over the
	// old one: a rename is seen whole or not at all.
	ReloadSettle time.Duration
}

// reloadAttempts is how many times Reload reads files that keep changing
// before it gives up (the previous policies stay).
const reloadAttempts = 5

// Authorizer authenticates requests (SigV4) and decides whether a principal
// may perform an action on a resource (IAM policies evaluated in embedded
// Rego, then custom Rego).
//
// All methods are safe for concurrent use. Authenticate and Authorize read
// one immutable generation of the policies; Reload swaps in a new
// generation atomically and only when it loaded completely.
type Authorizer struct {
	cfg  Config
	log  zerolog.Logger
	now  func() time.Time
	skew time.Duration
	// denials limits the log lines of denials and failed authentications.
	denials *denialLog

	reloadMu sync.Mutex
	st       atomic.Pointer[state]
	// bearers remembers the bearer tokens verified lately (bearer.go).
	bearers bearerCache
}

// state is one generation of credentials and compiled policies.
type state struct {
	*loaded
	*compiled
	regoFiles []string
	enabled   bool
	warnings  []string // statements that can never apply (Config.Targets)
	// fingerprint of the files when this generation was read (see Watch).
	fingerprint string
}

// Load reads and compiles everything cfg names. A file that does not parse
// or a policy that does not validate or compile is an error naming the file
// and line.
func Load(ctx context.Context, cfg Config) (*Authorizer, error) {
	a := &Authorizer{cfg: cfg, log: cfg.Logger, now: cfg.Now, skew: cfg.ClockSkew,
		denials: newDenialLog(cfg.Logger, cfg.DenialLogBurst, cfg.DenialLogWindow)}
	if a.now == nil {
		a.now = time.Now
	}
	if a.skew <= 0 {
		a.skew = 15 * time.Minute
	}
	st, err := a.build(ctx, nil)
	if err != nil {
		return nil, err
	}
	a.st.Store(st)
	a.logGeneration(st, "authz policies loaded")
	return a, nil
}

// build reads and compiles a generation; rd, when not nil, records what
// was read.
func (a *Authorizer) build(ctx context.Context, rd *readLog) (*state, error) {
	l, err := loadFiles(rd, a.cfg.CredentialsFile, a.cfg.PoliciesFile)
	if err != nil {
		return nil, err
	}
	extra := make(map[string]bool, len(a.cfg.ExtraConditionKeys))
	for _, k := range a.cfg.ExtraConditionKeys {
		extra[strings.ToLower(k)] = true
	}
	if err := checkConditionKeys(l.attachedDocs(), extra); err != nil {
		return nil, err
	}
	custom, files, err := loadCustomRego(rd, a.cfg.RegoPaths, false)
	if err != nil {
		return nil, err
	}
	size := a.cfg.DecisionCache
	if size == 0 {
		size = 10_000
	}
	c, err := compile(ctx, l, custom, size)
	if err != nil {
		return nil, err
	}
	st := &state{loaded: l, compiled: c, regoFiles: files, enabled: c.statements > 0 || c.custom > 0,
		warnings: unreachable(l.attachedDocs(), a.cfg.Targets)}
	st.fingerprint = a.fingerprint(st)
	return st, nil
}

func (a *Authorizer) logGeneration(st *state, msg string) {
	a.log.Info().
		Bool("enabled", st.enabled).
		Int("access_keys", len(st.keys)).
		Int("principals", len(st.setOf)).
		Int("statements", st.statements).
		Int("rego_modules", st.custom).
		Msg(msg)
	for _, w := range st.warnings {
		a.log.Warn().Str("statement", w).Msg("authz policy statement can never apply")
	}
}

// Warnings are the statements of the policies in force that can never
// apply (see Targets), each as FILE:LINE: and what it names.
func (a *Authorizer) Warnings() []string {
	return slices.Clone(a.st.Load().warnings)
}

// Enabled reports whether any policy (IAM statement or custom Rego module)
// is configured. When false, Authorize allows everything (development
// mode).
func (a *Authorizer) Enabled() bool { return a.st.Load().enabled }

// ReadsResourceTags reports whether decisions may depend on the tags of the
// resource (aws:ResourceTag/<key>, sagemaker:ResourceTag/<key>): an IAM
// statement names such a key, or custom Rego (which may read any key) is
// configured. Callers skip looking the tags up when it is false.
func (a *Authorizer) ReadsResourceTags() bool {
	st := a.st.Load()
	return st.enabled && (st.custom > 0 || st.resourceTags)
}

// Reload reads and compiles the configured files again and, only if that
// succeeds, puts the new generation in force. On error the old one stays.
//
// A reload can keep or replace policies but never switch them off: it is
// refused (ErrReloadRefused, the old generation stays) when a configured
// file that held something is now empty, when the credentials file that
// held access keys now holds none, or when the new files configure no
// policy while the old ones did. Going from enforced to not enforced takes
// a restart, where mce serve checks its listener again.
func (a *Authorizer) Reload(ctx context.Context) error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	st, err := a.buildSettled(ctx)
	if err == nil {
		err = a.weakens(a.st.Load(), st)
	}
	if err != nil {
		a.log.Error().Err(err).Msg("authz reload failed; the previous policies stay in force")
		return err
	}
	a.st.Store(st)
	a.logGeneration(st, "authz policies reloaded")
	return nil
}

// buildSettled builds a generation from files that held still while they
// were read: after reading, it waits ReloadSettle and reads every file
// again; if one changed (a write in progress: valid YAML that stops before
// a Deny is the danger), it starts over, up to reloadAttempts times.
func (a *Authorizer) buildSettled(ctx context.Context) (*state, error) {
	settle := a.cfg.ReloadSettle
	if settle <= 0 {
		settle = 250 * time.Millisecond
	}
	changed := ""
	for range reloadAttempts {
		rd := &readLog{}
		st, err := a.build(ctx, rd)
		t := time.NewTimer(settle)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		if changed = rd.changed(); changed == "" {
			return st, err
		}
		a.log.Info().Str("file", changed).Msg("authz policy file changed while being read; reading it again")
	}
	return nil, fmt.Errorf("%s kept changing while being read (%d tries); write the new file elsewhere and rename it into place", changed, reloadAttempts)
}

// weakens says why a new generation may not replace old: it would disable
// authorization, or it comes from files that look truncated or emptied
// (often a write in progress, or a mistake).
func (a *Authorizer) weakens(old, next *state) error {
	for _, f := range next.empty {
		if !slices.Contains(old.empty, f) {
			return fmt.Errorf("%w: %s is now empty", ErrReloadRefused, f)
		}
	}
	if a.cfg.CredentialsFile != "" && len(old.keys) > 0 && len(next.keys) == 0 {
		return fmt.Errorf("%w: %s now holds no access keys", ErrReloadRefused, a.cfg.CredentialsFile)
	}
	if old.enabled && !next.enabled {
		return fmt.Errorf("%w: the files now configure no policy, which would allow every request; restart mce to run without policies", ErrReloadRefused)
	}
	return nil
}

// Watch reloads whenever one of the files in use (or a .rego file under a
// configured directory) changes, polling every second, until ctx ends. It
// blocks; run it in its own goroutine.
func (a *Authorizer) Watch(ctx context.Context) {
	a.watch(ctx, time.Second)
}

func (a *Authorizer) watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	failed := "" // fingerprint of files that failed to load; not retried until they change
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st := a.st.Load()
		fp := a.fingerprint(st)
		if fp == st.fingerprint || fp == failed {
			continue
		}
		a.log.Info().Msg("authz policy files changed; reloading")
		if err := a.Reload(ctx); err != nil { // Reload logs the outcome
			failed = fp
		}
	}
}

// fingerprint summarizes the size and modification time of every file st
// read, the configured files, and the .rego files under the configured
// paths.
func (a *Authorizer) fingerprint(st *state) string {
	var b strings.Builder
	stat := func(p string) {
		b.WriteString(p)
		if fi, err := os.Stat(p); err == nil {
			b.WriteString(strconv.FormatInt(fi.ModTime().UnixNano(), 36))
			b.WriteByte('.')
			b.WriteString(strconv.FormatInt(fi.Size(), 36))
		}
		b.WriteByte('\n')
	}
	stat(a.cfg.CredentialsFile)
	stat(a.cfg.PoliciesFile)
	for _, f := range st.files {
		stat(f)
	}
	for _, root := range a.cfg.RegoPaths {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".rego") {
				stat(p)
			}
			return nil
		})
	}
	return b.String()
}

// Authenticate verifies the request's AWS SigV4 signature (Authorization
// header) over body, the whole request body, and returns the principal of
// the access key. An unsigned request gives an anonymous Principal. Without
// a credentials file nothing is verified and every caller is anonymous
// (AccessKeyID is still filled in for logs). Failures are *AuthError.
// Query-string (presigned) authentication is refused.
func (a *Authorizer) Authenticate(r *http.Request, body []byte) (Principal, error) {
	st := a.st.Load()
	auth, p, done, err := a.unverified(r)
	if done {
		return p, err
	}
	cred, aerr := verifySigV4(r, body, st.keys, a.now(), a.skew, a.cfg.Region)
	if aerr != nil {
		a.logAuthFailure(accessKeyFromHeader(auth[0]), r.RemoteAddr, aerr.Code, "authentication failed")
		return Principal{}, aerr
	}
	return cred.principal, nil
}

// AuthenticateHeaders makes the checks of Authenticate that need no body,
// so that a request that cannot be authenticated is refused before its body
// is read. complete reports that the body plays no part in authenticating r
// (an unsigned request, or no credentials file): p is then what
// Authenticate would return. Otherwise p is empty and Authenticate must
// still verify the signature over the body; what was checked here is the
// Authorization header's shape, X-Amz-Date, the credential scope, that the
// access key exists, the clock skew, the session token and, when
// X-Amz-Content-Sha256 is sent, the signature itself. Failures are
// *AuthError, the same Authenticate gives.
func (a *Authorizer) AuthenticateHeaders(r *http.Request) (p Principal, complete bool, err error) {
	st := a.st.Load()
	auth, p, done, err := a.unverified(r)
	if done {
		return p, err == nil, err
	}
	if _, aerr := verifySigV4Headers(r, st.keys, a.now(), a.skew, a.cfg.Region); aerr != nil {
		a.logAuthFailure(accessKeyFromHeader(auth[0]), r.RemoteAddr, aerr.Code, "authentication failed before the body was read")
		return Principal{}, false, aerr
	}
	return Principal{}, false, nil
}

// unverified is what every Authenticate does before a signature: a
// presigned request is refused, an unsigned one (or any, without a
// credentials file) is anonymous; done reports that p and err are the
// answer. Otherwise auth is the Authorization header's values (one or more).
func (a *Authorizer) unverified(r *http.Request) (auth []string, p Principal, done bool, err error) {
	if presigned(r) {
		return nil, Principal{}, true, authErr(r, CodeIncompleteSignature, presignedMessage)
	}
	auth = r.Header.Values("Authorization")
	if len(auth) == 0 {
		return nil, Principal{Anonymous: true}, true, nil
	}
	if a.cfg.CredentialsFile == "" {
		return auth, Principal{Anonymous: true, AccessKeyID: accessKeyFromHeader(auth[0])}, true, nil
	}
	return auth, Principal{}, false, nil
}

const presignedMessage = "Query-string authentication (presigned URLs) is not supported by mce; sign requests with the Authorization header (AWS SigV4)."

// LookupAccessKey returns the principal of an access key in the credentials
// file (for tools; the request path uses Authenticate).
func (a *Authorizer) LookupAccessKey(accessKeyID string) (Principal, bool) {
	c, ok := a.st.Load().keys[accessKeyID]
	if !ok {
		return Principal{}, false
	}
	return c.principal, true
}

// errorf wraps ErrEvaluation.
func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrEvaluation, fmt.Sprintf(format, args...))
}
