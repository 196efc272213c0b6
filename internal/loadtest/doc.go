// Package loadtest drives a SageMaker endpoint (an mce host or SageMaker
// itself) through the SageMaker Runtime API in stages and reports what it
// measured: per stage and per second, requests/s, latency percentiles and
// errors by SageMaker error code; the endpoint's own metrics when the target
// is mce; and the load generator's own CPU use, so that a saturated generator
// shows in its report.
//
// A Plan (stages of concurrent users with a spawn rate, or of a target request
// rate; traffic over models; request options; a latency target and stop
// rules; limits) is validated once by Plan.Validate. Run executes it through an
// Invoker (SDK in production, a fake in tests) and returns a Report, which
// writes itself as JSON, CSV, PNG charts and a self-contained HTML page.
//
// Latency is measured from the intended send time. For a user stage (closed
// model) that is when the user sends; for a rate stage (open model) it is the
// scheduled time on the stage's clock, so a request delayed because the
// generator or the endpoint fell behind counts its wait: coordinated omission
// is not hidden. Latencies are kept in HDR histograms
// (github.com/HdrHistogram/hdrhistogram-go, 3 significant digits from 1 µs to
// 10 minutes): their memory does not grow with the number of requests, and
// their error is at most 0.1 % of the value, well under the noise of a network
// call. Only failures' codes and the first call to each model (cold vs warm)
// are kept per model name, bounded by the number of models.
//
// The package makes no calls of its own other than through the Invoker and
// the optional metrics Scraper; it never changes the endpoint.
package loadtest
