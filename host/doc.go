// Package host is mce's HTTP front: the SageMaker Runtime API (restJson1,
// POST /endpoints/{name}/invocations) on one listener, request parsing and
// validation against the limits in the contracts doc (§1.3), the endpoint
// registry and its lifecycle (Creating → InService | Failed → Deleting),
// SageMaker's error shapes, and the Prometheus metrics endpoint.
//
// Every error a client sees is written in exactly one place (writeError): an
// *APIError with SageMaker's code, HTTP status, X-Amzn-ErrorType header and a
// JSON body holding __type and Message — never an empty or HTML body. Layers
// below return typed errors (pipeline.ModelError, pipeline.ValidationError,
// spec.ValidationError …) and toAPIError maps them.
//
// host reaches containers only through pipeline (routing) and the Backend
// interface (bringing endpoints up and down); it never calls Docker itself.
package host
