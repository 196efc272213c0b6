package cloudwatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/mce-run/mce/internal/awsquery"
	"github.com/mce-run/mce/internal/wire"
)

// The HTTP entry: which requests are CloudWatch's, which protocol each
// speaks, and the one dispatch they share (authorize, decode, run, encode).

const (
	// ServiceName is CloudWatch's Smithy service name: the X-Amz-Target
	// prefix of AWS JSON 1.0 calls and the path segment of RPC v2 CBOR ones.
	ServiceName = "GraniteServiceVersion20100801"
	// TargetPrefix starts the X-Amz-Target of AWS JSON 1.0 calls.
	TargetPrefix = ServiceName + "."
	// CBORPathPrefix starts the path of RPC v2 CBOR calls.
	CBORPathPrefix = "/service/" + ServiceName + "/operation/"
	// APIVersion is the Version of query-protocol calls.
	APIVersion = "2010-08-01"
	// SigningName is the service CloudWatch requests are signed for.
	SigningName = "monitoring"
	// xmlNamespace of query-protocol answers.
	xmlNamespace = "http://monitoring.amazonaws.com/doc/2010-08-01/"

	contentTypeJSON = "application/x-amz-json-1.0"
	contentTypeCBOR = "application/cbor"
	contentTypeForm = "application/x-www-form-urlencoded"
	headerTarget    = wire.HeaderAmzTarget
	headerSmithy    = "Smithy-Protocol"
	headerQueryErr  = wire.HeaderQueryError
	headerRequestID = wire.HeaderRequestID
	smithyRPCv2CBOR = "rpc-v2-cbor"
)

// Operations are the CloudWatch operations mce serves; each is authorized
// as the action cloudwatch:<Operation> on "*".
func Operations() []string {
	return []string{"GetMetricStatistics", "GetMetricData", "ListMetrics",
		"PutMetricAlarm", "DescribeAlarms", "DeleteAlarms", "SetAlarmState", "DescribeAlarmHistory"}
}

type protocol int

const (
	protoNone protocol = iota
	protoJSON
	protoCBOR
	protoQuery
)

func (p protocol) String() string {
	switch p {
	case protoJSON:
		return "awsJson1_0"
	case protoCBOR:
		return "rpcv2Cbor"
	case protoQuery:
		return "awsQuery"
	}
	return "none"
}

// detect tells a CloudWatch request by its headers and path alone: it
// never reads the body. The query protocol, whose operation is in the body,
// is told by the shape of the request (POST / of a form with no
// X-Amz-Target); Serve checks its Action and Version.
func detect(r *http.Request) (protocol, string) {
	if r.Method != http.MethodPost {
		return protoNone, ""
	}
	if op, ok := strings.CutPrefix(r.URL.Path, CBORPathPrefix); ok && op != "" && !strings.Contains(op, "/") {
		return protoCBOR, op
	}
	if r.URL.Path != "/" && r.URL.Path != "" {
		return protoNone, ""
	}
	if t := r.Header.Get(headerTarget); t != "" {
		if op, ok := strings.CutPrefix(t, TargetPrefix); ok && op != "" {
			return protoJSON, op
		}
		return protoNone, ""
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt == contentTypeForm {
		return protoQuery, ""
	}
	return protoNone, ""
}

// MayBeRequest tells from r's headers and path alone whether it is
// CloudWatch's, for a router that has not read the body: an X-Amz-Target of
// CloudWatch, the RPC v2 CBOR path, or a POST / form without a target (the
// query protocol, whose Version Serve checks once the body is read).
func MayBeRequest(r *http.Request) bool {
	p, _ := detect(r)
	return p != protoNone
}

// OperationOf names the operation from the headers and path ("*" for the
// query protocol, whose operation is in the body), for the access log.
func OperationOf(r *http.Request) string {
	if _, op := detect(r); op != "" {
		return op
	}
	return "*"
}

// QueryCode is the code CloudWatch, a query-compatible service, gives the
// authentication failures that JSON services name otherwise: host's
// authorizer says IncompleteSignatureException, InvalidSignatureException,
// UnrecognizedClientException and AccessDeniedException; CloudWatch's
// clients see IncompleteSignature, SignatureDoesNotMatch,
// InvalidClientTokenId and AccessDenied. Other codes are kept.
func QueryCode(code string) string {
	switch code {
	case "IncompleteSignatureException":
		return "IncompleteSignature"
	case "InvalidSignatureException":
		return "SignatureDoesNotMatch"
	case "UnrecognizedClientException":
		return "InvalidClientTokenId"
	case "AccessDeniedException":
		return CodeAccessDenied
	}
	return code
}

// ServeHTTP reads the body (at most Options.MaxRequestBytes) and serves
// it: for tests and a listener of its own. host, which has read and
// authenticated the body already, calls Serve.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(s.maxBody)+1))
	if err != nil {
		p, _ := detect(r)
		writeError(w, p, newErr(http.StatusBadRequest, CodeSerialization, CodeSerialization, "The request body could not be read."))
		return
	}
	s.Serve(w, r, body)
}

// Serve answers one CloudWatch call whose body host has read (and
// authenticated). It authorizes the operation through Options.Authorize,
// decodes the body once, runs the operation and writes the answer or the
// error in the request's protocol. A request that is not CloudWatch's
// (MayBeRequest false) is answered 404 in the JSON shape.
func (s *Service) Serve(w http.ResponseWriter, r *http.Request, body []byte) {
	s.ServeAuthorized(w, r, body, s.authorize)
}

// ServeAuthorized is Serve with the decision made by authorize instead of
// Options.Authorize: host, which has authenticated the caller of this very
// request, decides for that principal. A nil authorize allows the call.
func (s *Service) ServeAuthorized(w http.ResponseWriter, r *http.Request, body []byte, authorize func(ctx context.Context, r *http.Request, action string) error) {
	s.serve(w, r, body, nil, authorize)
}

// ServeForm is ServeAuthorized for a query-protocol call whose form the
// caller has parsed already (host reads a form once to route it by its
// Version among the query services it serves).
func (s *Service) ServeForm(w http.ResponseWriter, r *http.Request, body []byte, form *awsquery.Form, authorize func(ctx context.Context, r *http.Request, action string) error) {
	s.serve(w, r, body, form, authorize)
}

// IsForm says whether r is a query-protocol call (a form POSTed to /).
func IsForm(r *http.Request) bool {
	p, _ := detect(r)
	return p == protoQuery
}

func (s *Service) serve(w http.ResponseWriter, r *http.Request, body []byte, parsed *awsquery.Form, authorize func(ctx context.Context, r *http.Request, action string) error) {
	p, op := detect(r)
	if p == protoNone {
		writeError(w, protoJSON, newErr(http.StatusNotFound, CodeUnknownOperation, CodeUnknownOperation, "Not a CloudWatch request."))
		return
	}
	if len(body) > s.maxBody {
		writeError(w, p, newErr(http.StatusRequestEntityTooLarge, CodeRequestTooLarge, CodeRequestTooLarge, "The request body is larger than mce accepts for CloudWatch."))
		return
	}
	form := parsed
	if p == protoQuery {
		if form == nil {
			f, err := awsquery.Parse(body, awsquery.Limits{})
			if err != nil {
				writeError(w, p, newErr(http.StatusBadRequest, CodeMalformedQueryString, CodeMalformedQueryString, err.Error()))
				return
			}
			form = f
		}
		if form.Version() != APIVersion {
			writeError(w, p, newErr(http.StatusBadRequest, CodeInvalidAction, CodeInvalidAction, "The Version "+quoted(form.Version())+" is not CloudWatch's (2010-08-01)."))
			return
		}
		op = form.Action()
	}
	if p == protoCBOR {
		if e := checkCBORHeaders(r); e != nil {
			writeError(w, p, e)
			return
		}
	}
	if !slices.Contains(Operations(), op) {
		writeError(w, p, unknownOperation(p, op))
		return
	}
	if authorize != nil {
		if err := authorize(r.Context(), r, "cloudwatch:"+op); err != nil {
			writeError(w, p, accessDenied(err))
			return
		}
	}
	var out any
	var e *APIError
	switch op {
	case "GetMetricStatistics":
		var in getMetricStatisticsInput
		if e = decode(p, body, form, &in); e == nil {
			out, e = nilIfErr(s.getMetricStatistics(&in))
		}
	case "GetMetricData":
		var in getMetricDataInput
		if e = decode(p, body, form, &in); e == nil {
			out, e = nilIfErr(s.getMetricData(&in))
		}
	case "ListMetrics":
		var in listMetricsInput
		if e = decode(p, body, form, &in); e == nil {
			out, e = nilIfErr(s.listMetrics(&in))
		}
	case "PutMetricAlarm":
		var in putMetricAlarmInput
		if e = decode(p, body, form, &in); e == nil {
			out, e = nilIfErr(s.putMetricAlarm(&in))
		}
	case "DescribeAlarms":
		var in describeAlarmsInput
		if e = decode(p, body, form, &in); e == nil {
			out, e = nilIfErr(s.describeAlarms(&in))
		}
	case "DeleteAlarms":
		var in deleteAlarmsInput
		if e = decode(p, body, form, &in); e == nil {
			out, e = nilIfErr(s.deleteAlarms(&in))
		}
	case "SetAlarmState":
		var in setAlarmStateInput
		if e = decode(p, body, form, &in); e == nil {
			out, e = nilIfErr(s.setAlarmState(&in))
		}
	case "DescribeAlarmHistory":
		var in describeAlarmHistoryInput
		if e = decode(p, body, form, &in); e == nil {
			out, e = nilIfErr(s.describeAlarmHistory(&in))
		}
	}
	if e != nil {
		writeError(w, p, e)
		return
	}
	writeOutput(w, p, op, out)
}

// nilIfErr keeps a typed nil pointer out of an interface.
func nilIfErr[T any](v *T, e *APIError) (any, *APIError) {
	if e != nil {
		return nil, e
	}
	return v, nil
}

func unknownOperation(p protocol, op string) *APIError {
	served := "mce serves CloudWatch's GetMetricStatistics, GetMetricData, ListMetrics, PutMetricAlarm, DescribeAlarms, " +
		"DeleteAlarms, SetAlarmState and DescribeAlarmHistory only."
	if p == protoQuery {
		return newErr(http.StatusBadRequest, CodeInvalidAction, CodeInvalidAction, "The action "+quoted(op)+" is not valid for this web service: "+served)
	}
	return newErr(http.StatusBadRequest, CodeUnknownOperation, CodeUnknownOperation, "The operation "+quoted(op)+" is not served: "+served)
}

// decode reads body in protocol p into in.
func decode(p protocol, body []byte, form *awsquery.Form, in any) *APIError {
	switch p {
	case protoJSON:
		return decodeJSON(body, in)
	case protoCBOR:
		return decodeCBOR(body, in)
	case protoQuery:
		return decodeQuery(form, in)
	}
	return newErr(http.StatusBadRequest, CodeSerialization, CodeSerialization, "unknown protocol")
}

func requestID(w http.ResponseWriter) string {
	if id := w.Header().Get(headerRequestID); id != "" {
		return id
	}
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	id := h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	w.Header().Set(headerRequestID, id)
	return id
}

// writeError is the one place an error is written, in p's shape.
func writeError(w http.ResponseWriter, p protocol, e *APIError) {
	id := requestID(w)
	switch p {
	case protoQuery:
		awsquery.WriteError(w, e.Status, xmlNamespace, e.Fault, e.Code, e.Message, id)
		return
	case protoCBOR:
		w.Header().Set(headerSmithy, smithyRPCv2CBOR)
		w.Header().Set(headerQueryErr, e.Code+";"+string(e.Fault))
		writeBody(w, contentTypeCBOR, e.Status, encodeCBORError(e))
	default:
		w.Header().Set(headerQueryErr, e.Code+";"+string(e.Fault))
		writeBody(w, contentTypeJSON, e.Status, encodeJSONError(e))
	}
}

func writeOutput(w http.ResponseWriter, p protocol, op string, out any) {
	id := requestID(w)
	switch p {
	case protoQuery:
		encodeQuery(op, id, out).Send(w)
	case protoCBOR:
		b, err := cborEnc.Marshal(out)
		if err != nil {
			writeError(w, p, internalError("The answer could not be encoded."))
			return
		}
		w.Header().Set(headerSmithy, smithyRPCv2CBOR)
		writeBody(w, contentTypeCBOR, http.StatusOK, b)
	default:
		b, err := marshalJSON(out)
		if err != nil {
			writeError(w, p, internalError("The answer could not be encoded."))
			return
		}
		writeBody(w, contentTypeJSON, http.StatusOK, b)
	}
}

func writeBody(w http.ResponseWriter, contentType string, status int, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	w.Write(b)
}
