package spec

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel causes carried by *DecodeError; test them with errors.Is.
var (
	// ErrTooLarge: the input is larger than MaxFileSize.
	ErrTooLarge = errors.New("larger than the limit of " + strconv.Itoa(MaxFileSize) + " bytes")
	// ErrTooDeep: the input nests deeper than MaxDepth or holds more than maxValues values.
	ErrTooDeep = errors.New("nested too deeply or too many values")
	// ErrUnknownField: a key that the shape does not have (keys are case-sensitive).
	ErrUnknownField = errors.New("unknown field")
	// ErrType: a value of the wrong JSON type (a string where a number belongs, …).
	ErrType = errors.New("wrong type")
	// ErrSyntax: the input is not well-formed YAML or JSON.
	ErrSyntax = errors.New("syntax error")
	// ErrEmpty: an endpoint file without definitions.
	ErrEmpty = errors.New("no Models, EndpointConfigs or Endpoints")
)

// DecodeError is a failure to turn bytes into the shapes of this package:
// bad syntax, an unknown key, a value of the wrong type, or input over the
// size and nesting caps. Path names the offending value the way it is
// written in the file, e.g. `Models[0].Containers[1].Imagee`.
type DecodeError struct {
	File string // file name as given to LoadFiles or Parse; empty for API bodies
	Path string // location inside the document; empty for whole-document problems
	Err  error  // the cause; wraps one of the Err* sentinels
}

func (e *DecodeError) Error() string {
	return joinNonEmpty(e.File, e.Path, e.Err.Error())
}

func (e *DecodeError) Unwrap() error { return e.Err }

// ValidationError is SageMaker's ValidationException: the shapes decoded but
// break a rule. Messages use SageMaker's wording where it has one.
//
// Two kinds exist, as in SageMaker: per-field constraint failures
// ("Value 'x y' at 'containers.2.member.containerHostname' failed to satisfy
// constraint: …", Constraints true), which Message renders behind
// "N validation error(s) detected: " joined by "; "; and semantic failures
// (whole sentences such as "More than one container in MultiModel mode is not
// supported with inference pipeline."), which Message joins by a space.
type ValidationError struct {
	Messages    []string
	Constraints bool   // Messages are per-field constraint failures
	File        string // file the definition came from; empty for API requests
	Path        string // the definition inside File, e.g. "Models[0]"; empty for API requests
}

// Message is the text for the Message member of a ValidationException,
// without File and Path.
func (e *ValidationError) Message() string {
	if !e.Constraints {
		return strings.Join(e.Messages, " ")
	}
	n := len(e.Messages)
	noun := "validation errors"
	if n == 1 {
		noun = "validation error"
	}
	return strconv.Itoa(n) + " " + noun + " detected: " + strings.Join(e.Messages, "; ")
}

func (e *ValidationError) Error() string {
	return joinNonEmpty(e.File, e.Path, e.Message())
}

// Kind names a SageMaker resource type as it appears in ARNs.
type Kind string

// The resource kinds this package defines.
const (
	KindModel          Kind = "model"
	KindEndpointConfig Kind = "endpoint-config"
	KindEndpoint       Kind = "endpoint"
)

// noun is the kind as SageMaker's messages spell it.
func (k Kind) noun() string {
	switch k {
	case KindEndpointConfig:
		return "endpoint configuration"
	case KindInferenceComponent:
		return "inference component"
	}
	return string(k)
}

// NotFoundError is a reference to a resource that does not exist: an endpoint
// configuration naming a missing model, an endpoint naming a missing
// configuration. SageMaker reports it as a ValidationException.
type NotFoundError struct {
	Kind Kind
	Name string
	ARN  string
	File string // file holding the reference; empty for API requests
	Path string // the referring definition inside File
}

// Message is SageMaker's text, e.g. `Could not find model "arn:aws:sagemaker:…:model/x".`
func (e *NotFoundError) Message() string {
	return `Could not find ` + e.Kind.noun() + ` "` + e.ARN + `".`
}

func (e *NotFoundError) Error() string { return joinNonEmpty(e.File, e.Path, e.Message()) }

// AlreadyExistsError is a second definition of a name already taken (names
// compare case-insensitively, as their ARNs do). SageMaker reports it as a
// ValidationException.
type AlreadyExistsError struct {
	Kind     Kind
	Name     string
	ARN      string
	File     string // file of the second definition; empty for API requests
	Path     string // the second definition inside File
	Previous string // file of the first definition, when known
}

// Message is SageMaker's text, e.g. `Cannot create already existing model "arn:…:model/x".`
func (e *AlreadyExistsError) Message() string {
	return `Cannot create already existing ` + e.Kind.noun() + ` "` + e.ARN + `".`
}

func (e *AlreadyExistsError) Error() string {
	msg := e.Message()
	if e.Previous != "" {
		msg += " (first defined in " + e.Previous + ")"
	}
	return joinNonEmpty(e.File, e.Path, msg)
}

// ARN is the Amazon Resource Name of a SageMaker resource. As SageMaker does,
// it lower-cases the name while *Name fields keep the caller's case (e.g. the EndpointArn of
// https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeEndpoint.html#API_DescribeEndpoint_ResponseSyntax).
// The partition follows the region: cn-* → aws-cn, us-gov-* → aws-us-gov.
func ARN(region, account string, kind Kind, name string) string {
	partition := "aws"
	switch {
	case strings.HasPrefix(region, "cn-"):
		partition = "aws-cn"
	case strings.HasPrefix(region, "us-gov-"):
		partition = "aws-us-gov"
	}
	return "arn:" + partition + ":sagemaker:" + region + ":" + account + ":" + string(kind) + "/" + strings.ToLower(name)
}

func joinNonEmpty(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(p)
	}
	return b.String()
}
