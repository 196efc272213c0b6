// Package httpc is the small HTTP/1.1 client that package pipeline calls
// containers with: one call, Client.Do, sends one request and reads its
// answer. It knows nothing of endpoints, variants or chains, and nothing of
// any mce package but internal/wire (header names).
//
// Do does the whole exchange on the calling goroutine: plain http only, no
// proxy, one write for the request line, headers and Content-Length-framed
// body (no chunked requests), and a response read under caps (64 KiB of
// status line and headers, values without control characters;
// Content-Length, chunked or until close; 1xx answers skipped; HTTP/1.0
// answers). A 2xx body is read into the caller's buffer under
// Options.MaxBody, or handed to a Streamer as it arrives; of another
// status, the start of the body is kept for error messages.
//
// Each container base URL has its own pool of at most 256 idle keep-alive
// connections, most recently used first, closed after 90 s idle or by
// Forget and Close; a connection goes back to the pool only when its answer
// was read whole and the container keeps it alive. Connections idle for
// more than a second are checked before use. A request sent on a reused
// connection that fails before any byte of an answer came back (the
// container closed the idle connection as the request went out) is sent
// once more, on a new connection; nothing else is retried. The caller's
// context going away cuts the connection at once, which the container sees
// as its request cancelled.
//
// A Client is safe for concurrent use.
package httpc
