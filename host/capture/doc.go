// Package capture carries out SageMaker's data capture
// (https://docs.aws.amazon.com/sagemaker/latest/dg/model-monitor-data-capture.html)
// for mce's endpoints: it samples calls by an endpoint's DataCaptureConfig
// (spec.DataCaptureConfig), keeps the sampled requests and answers in a
// bounded buffer, and writes them in the background, as SageMaker writes
// them, to S3: JSON Lines records (Record) in objects named
// DESTINATION/ENDPOINT/VARIANT/yyyy/mm/dd/hh/mm-ss-SSS-UUID.jsonl.
//
// It owns: the sampling decision, the record format, the buffer and its
// bound, batching, naming, uploads and their retries, its Prometheus
// metrics and the status DescribeEndpoint shows (Status). It must not touch
// the call it records: a call asks Sample (no lock, no allocation) and, when
// sampled, hands its payloads to Ticket.Record, which copies them and
// returns at once; when the buffer is full the record is dropped, counted
// and logged (rate-limited), never waited for. It knows nothing of HTTP,
// endpoints' lifecycles or authorization: host decides which calls to offer,
// builds one Capturer per endpoint (Writer.NewCapturer), replaces its
// configuration on UpdateEndpoint (Capturer.Update) and closes the Writer at
// shutdown, which writes everything buffered within the context's deadline.
//
// Concurrency: Writer and Capturer are safe for concurrent use; a nil
// *Capturer samples nothing, so an endpoint without capture needs no
// branch. docs/data-capture.md describes the behaviour for users.
package capture
