// Package cloudwatch is mce's CloudWatch metrics API and the durable store
// of its datapoints: GetMetricStatistics, GetMetricData (MetricStat
// queries) and ListMetrics, in the three protocols CloudWatch's clients
// speak — AWS JSON 1.0 (boto3 and the aws CLI of today), Smithy RPC v2 CBOR
// (aws-sdk-go-v2's cloudwatch from v1.52) and the query protocol (older
// boto3 and aws CLI) — decoded to the same typed inputs and answered, errors
// included, in each protocol's own shape; and a recorder (Series with
// ObserveAt/Observe, AddSampler for gauges) that the invocation path feeds.
// Host calls Serve with the body it read (after MayBeRequest, authentication
// and with Options.Authorize for the decision), WriteError for its own
// refusals of a CloudWatch call, and Statistics to read figures in Go.
//
// Metric alarms (PutMetricAlarm, DescribeAlarms, DeleteAlarms,
// SetAlarmState, DescribeAlarmHistory) are served the same way: one
// evaluator goroutine reads the store every Options.AlarmInterval as
// GetMetricStatistics does and moves alarms between OK, ALARM and
// INSUFFICIENT_DATA by the user guide's missing-data rules
// (alarm_eval.go); OnStateChange hooks are told. Alarm actions are stored,
// never executed. Each alarm is a file under Options.Dir/alarms
// (alarm_store.go).
//
// It owns: the wire of those three operations (http.go, codec.go; the
// generic query-protocol form and XML are internal/awsquery's), their
// validation and CloudWatch's limits and messages (ops.go, statistics.go),
// the per-period aggregation of every series into a statistic set and a
// DDSketch for percentiles (store.go, sketch.go, query.go), and the files
// in Options.Dir: the alarms' files, one append-only segment per hour, fsynced before a closed
// period is visible, deleted past the retention, bounded by
// Options.MaxDiskBytes, with torn tails cut at Open (segment.go, flush.go).
//
// It must not touch: authentication (host verifies SigV4, signed for
// service "monitoring", before it calls Serve), the decision itself
// (Options.Authorize is host's; this package only names the action,
// cloudwatch:<Operation> on "*"), routing (host tells CloudWatch's requests
// with MayBeRequest), anything of SageMaker (which metrics exist, their
// names, dimensions and units are the caller's: it records what it is told,
// within CloudWatch's bounds on names), and any file outside Options.Dir.
// CloudWatch Logs (Logs_20140328.*) is a different service and not here.
//
// Concurrency: a Service and its Series handles are safe for concurrent
// use; Series.Observe takes one short per-series lock and allocates
// nothing once the series' sketch exists.
package cloudwatch
