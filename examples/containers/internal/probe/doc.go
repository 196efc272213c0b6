// Package probe is the test and benchmark container: it echoes requests fast and, on request, misbehaves
// in controlled ways so that the host's routing, error mapping, health checks and restarts can be tested
// against a real container. It owns no model; it lists what is in the model directory.
//
// POST /invocations echoes the body with the request's Content-Type (default application/octet-stream);
// with PROBE_TAG set, the tag is appended to the echo. The X-Amzn-SageMaker-Custom-Attributes request
// header (comma-separated k=v; unknown keys ignored) switches behaviour, applied in this order:
//
//	crash=CODE    exit the process at once with CODE (0-255); no response
//	sleep=DUR     wait DUR (Go duration, at most 10m) or until the request is cancelled
//	attrs=VALUE   answer with header X-Amzn-SageMaker-Custom-Attributes: VALUE
//	ct=TYPE       answer with Content-Type TYPE (all answers except info)
//	status=NNN    answer NNN (200-599) with body "probe <hostname>: forced status NNN" (text/plain)
//	info          answer application/json describing the container (see Info)
//	size=N        answer N bytes of 'x' (at most 64 MiB) instead of the echo
//	open=NAME     open gate NAME (see gate=) and answer 200 "opened NAME"
//	stream=N      answer N parts "part I of N, B bytes in\n" (B: the request body's length; PROBE_TAG
//	              before the newline; text/plain unless ct=), each written and flushed on its own: an
//	              HTTP/1.1 chunked answer produced over time. With it:
//	  every=DUR   wait DUR before each part after the first
//	  gate=NAME   before the second part, wait until a request with open=NAME arrives (a test's proof
//	              that the first part reached it while the answer was still being produced)
//	  cut=K       drop the connection after part K (the answer never ends)
//	  die=K       exit the process (code 1) after part K
//	  stall=K     after part K, send nothing more until the request is cancelled
//
// Environment: PROBE_TAG; PROBE_PING=fail (GET /ping always 503); PROBE_READY_AFTER=DUR (503 until DUR
// after start); PROBE_EXIT_AFTER=DUR with PROBE_EXIT_CODE (default 1): exit by itself after DUR;
// PROBE_STATUS=NNN: every invocation without a status= of its own answers as status=NNN does.
// Invalid values stop the container with exit status 2.
//
// A JSON body (Content-Type application/json) naming "messages" is an OpenAI chat completion, answered as
// SageMaker's LLM containers answer one at /invocations (chat.go): the last message's words reversed, whole
// or as server-sent events. It is what mce's OpenAI-compatible route sends.
//
// A request with X-Amzn-SageMaker-Session-Id belongs to a stateful session and is answered by session.go
// (NEW_SESSION opens one, session-ttl=DUR sets its life, close-session closes it) instead of the switches. The probe writes no per-request logs.
package probe
