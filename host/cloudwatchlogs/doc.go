// Package cloudwatchlogs serves what endpoints' containers print, as
// SageMaker's users read it from CloudWatch Logs: each endpoint is the log
// group /aws/sagemaker/Endpoints/<EndpointName>, each running container a
// log stream. A Service answers two surfaces: Tail, mce's own streaming
// call GET /mce/endpoints/{name}/logs (mce logs, tail.go), and Call, the
// CloudWatch Logs operations FilterLogEvents, GetLogEvents and
// DescribeLogStreams over awsJson1_1 (X-Amz-Target Logs_20140328.*) with
// their cursors and paging (operations.go). service.go holds the Service,
// its Options and the small interfaces it reads endpoints through.
//
// It owns the answers and nothing else. The host keeps the routes and the
// dispatch on the X-Amz-Target prefix, and lets each call in — request ID,
// access log, authentication, the body within its limits — before handing
// it over with a Decide bound to the caller. Endpoints are reached only
// through Groups (a name as created, and the containers running now, whose
// output is read through Source); the package imports no engine and does
// not import host. Every error is an *apierr.Error, in CloudWatch Logs'
// codes where CloudWatch has its own.
package cloudwatchlogs
