// Package sessions is the table of SageMaker stateful sessions
// (https://docs.aws.amazon.com/sagemaker/latest/dg/stateful-sessions.html):
// which instance (or inference component copy) of which variant opened each
// session, and until when it lives.
//
// The container owns a session: it creates the id and its expiry when it
// answers a NEW_SESSION call (X-Amzn-SageMaker-New-Session-Id:
// "<id>; Expires=<RFC 3339 Z>") and says when it closed one
// (X-Amzn-SageMaker-Closed-Session-Id). The host records the first with
// Open and the second with Close; a later call naming the session is pinned
// to the instance Lookup returns (pipeline.Request.SessionInstance).
//
// The table is bounded (Options.Max entries) and cleans itself: every Open
// first drops the sessions that expired, and when the table is still full
// the session closest to its expiry makes room. A Lookup of an expired
// session drops it. Only calls that name a session touch the table; its one
// mutex is never on the path of calls without one.
//
// It owns no I/O and knows nothing of HTTP: the host parses headers with
// ParseNewSession and turns ErrNoSession into SageMaker's error.
package sessions
