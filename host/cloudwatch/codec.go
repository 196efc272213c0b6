package cloudwatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"mime"
	"net/http"
	"slices"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/mce-run/mce/internal/awsquery"
)

// The three protocols' codecs over the same typed inputs and outputs.
//
// AWS JSON 1.0: the body is the input structure as JSON, timestamps epoch
// seconds; an error is {"__type": "<shape id>", "message": "…"} with
// x-amzn-query-error: <query code>;Sender (CloudWatch is
// awsQueryCompatible, so botocore and the SDKs report the query code).
//
// Smithy RPC v2 CBOR (smithy.protocols#rpcv2Cbor): the body is the input
// structure as a CBOR map, timestamps tag 1 over epoch seconds (an integer
// or a float); answers carry smithy-protocol: rpc-v2-cbor, Content-Type
// application/cbor, timestamps as tag 1 over a double (what aws-sdk-go-v2
// writes and requires), an error is a CBOR map of __type and message with
// the same x-amzn-query-error header.
//
// Query: see internal/awsquery and query.go.

const shapePrefix = "com.amazonaws.cloudwatch#"

// cborDec bounds what a hostile body can make the decoder build: nesting,
// array and map sizes, duplicate keys, invalid UTF-8.
var cborDec = mustDecMode(cbor.DecOptions{
	DupMapKey:         cbor.DupMapKeyEnforcedAPF,
	IndefLength:       cbor.IndefLengthAllowed,
	TagsMd:            cbor.TagsAllowed,
	MaxNestedLevels:   16,
	MaxArrayElements:  65536,
	MaxMapPairs:       1024,
	UTF8:              cbor.UTF8RejectInvalid,
	FieldNameMatching: cbor.FieldNameMatchingCaseSensitive,
	ExtraReturnErrors: cbor.ExtraDecErrorNone,
})

var cborEnc = mustEncMode(cbor.EncOptions{
	IndefLength:   cbor.IndefLengthForbidden,
	NilContainers: cbor.NilContainerAsEmpty,
	ShortestFloat: cbor.ShortestFloatNone,
})

func mustDecMode(o cbor.DecOptions) cbor.DecMode {
	m, err := o.DecMode()
	if err != nil {
		panic(err) // constant options
	}
	return m
}

func mustEncMode(o cbor.EncOptions) cbor.EncMode {
	m, err := o.EncMode()
	if err != nil {
		panic(err) // constant options
	}
	return m
}

func serializationError(msg string) *APIError {
	return newErr(http.StatusBadRequest, CodeSerialization, CodeSerialization, msg)
}

func decodeJSON(body []byte, in any) *APIError {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil // an empty input structure
	}
	if err := json.Unmarshal(body, in); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return serializationError("The value of " + quoted(te.Field) + " is not a " + te.Type.String() + ".")
		}
		if errors.Is(err, errTimestamp) {
			return serializationError("A timestamp is not epoch seconds within mce's range.")
		}
		return serializationError("The request body is not the operation's input as JSON.")
	}
	return nil
}

func marshalJSON(out any) ([]byte, error) { return json.Marshal(out) }

func encodeJSONError(e *APIError) []byte {
	b, _ := json.Marshal(map[string]string{"__type": shapePrefix + e.Type, e.messageKey: e.Message})
	return b
}

// checkCBORHeaders: an RPC v2 CBOR call says so in smithy-protocol, and a
// body, if any, is application/cbor.
func checkCBORHeaders(r *http.Request) *APIError {
	if r.Header.Get(headerSmithy) != smithyRPCv2CBOR {
		return serializationError("An RPC v2 CBOR request carries the header smithy-protocol: rpc-v2-cbor.")
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != contentTypeCBOR {
			return serializationError("An RPC v2 CBOR request body is application/cbor.")
		}
	}
	return nil
}

func decodeCBOR(body []byte, in any) *APIError {
	if len(body) == 0 {
		return nil
	}
	if err := cborDec.Unmarshal(body, in); err != nil {
		if errors.Is(err, errTimestamp) {
			return serializationError("A timestamp is not CBOR tag 1 over epoch seconds within mce's range.")
		}
		return serializationError("The request body is not the operation's input as CBOR.")
	}
	return nil
}

func encodeCBORError(e *APIError) []byte {
	b, _ := cborEnc.Marshal(map[string]string{"__type": shapePrefix + e.Type, e.messageKey: e.Message})
	return b
}

// decodeQuery fills the input structs from a query-protocol form.
func decodeQuery(f *awsquery.Form, in any) *APIError {
	q := queryReader{f: f}
	switch in := in.(type) {
	case *getMetricStatisticsInput:
		in.Namespace = q.str("Namespace")
		in.MetricName = q.str("MetricName")
		in.Dimensions = q.dims("Dimensions")
		in.StartTime = q.time("StartTime")
		in.EndTime = q.time("EndTime")
		in.Period = q.int("Period")
		in.Statistics = q.strs("Statistics")
		in.ExtendedStatistics = q.strs("ExtendedStatistics")
		in.Unit = q.str("Unit")
	case *getMetricDataInput:
		for _, m := range f.Members("MetricDataQueries") {
			mq := metricDataQuery{
				ID:         q.str(m + ".Id"),
				Expression: q.str(m + ".Expression"),
				Label:      q.str(m + ".Label"),
				ReturnData: q.bool(m + ".ReturnData"),
				Period:     q.int(m + ".Period"),
				AccountID:  q.str(m + ".AccountId"),
			}
			if f.Has(m + ".MetricStat") {
				ms := &metricStat{Period: q.int(m + ".MetricStat.Period"), Stat: q.str(m + ".MetricStat.Stat"), Unit: q.str(m + ".MetricStat.Unit")}
				if mp := m + ".MetricStat.Metric"; f.Has(mp) {
					ms.Metric = &Metric{Namespace: q.str(mp + ".Namespace"), MetricName: q.str(mp + ".MetricName"), Dimensions: q.dims(mp + ".Dimensions")}
				}
				mq.MetricStat = ms
			}
			in.MetricDataQueries = append(in.MetricDataQueries, mq)
		}
		in.StartTime = q.time("StartTime")
		in.EndTime = q.time("EndTime")
		in.NextToken = q.str("NextToken")
		in.ScanBy = q.str("ScanBy")
		in.MaxDatapoints = q.int("MaxDatapoints")
		if tz := q.str("LabelOptions.Timezone"); tz != nil {
			in.LabelOptions = &labelOptions{Timezone: tz}
		}
	case *listMetricsInput:
		in.Namespace = q.str("Namespace")
		in.MetricName = q.str("MetricName")
		for _, m := range f.Members("Dimensions") {
			in.Dimensions = append(in.Dimensions, DimensionFilter{Name: q.str(m + ".Name"), Value: q.str(m + ".Value")})
		}
		in.NextToken = q.str("NextToken")
		in.RecentlyActive = q.str("RecentlyActive")
		in.IncludeLinkedAccounts = q.bool("IncludeLinkedAccounts")
		in.OwningAccount = q.str("OwningAccount")
	default:
		decodeAlarmQuery(&q, in)
	}
	return q.err
}

// queryReader reads typed members, keeping the first bad value's error.
type queryReader struct {
	f   *awsquery.Form
	err *APIError
}

func (q *queryReader) bad(err error) {
	var ve *awsquery.ValueError
	if q.err == nil && errors.As(err, &ve) {
		q.err = invalidValue("The value %s for parameter %s is invalid.", quoted(ve.Value), ve.Name)
	}
}

func (q *queryReader) str(name string) *string {
	if v, ok := q.f.String(name); ok {
		return &v
	}
	return nil
}

func (q *queryReader) strs(name string) []string { return q.f.Strings(name) }

func (q *queryReader) dims(name string) []Dimension {
	var out []Dimension
	for _, m := range q.f.Members(name) {
		n, _ := q.f.String(m + ".Name")
		v, _ := q.f.String(m + ".Value")
		out = append(out, Dimension{Name: n, Value: v})
	}
	return out
}

func (q *queryReader) int(name string) *int32 {
	v, ok, err := q.f.Int(name)
	if err != nil {
		q.bad(err)
		return nil
	}
	if !ok {
		return nil
	}
	return &v
}

func (q *queryReader) bool(name string) *bool {
	v, ok, err := q.f.Bool(name)
	if err != nil {
		q.bad(err)
		return nil
	}
	if !ok {
		return nil
	}
	return &v
}

func (q *queryReader) time(name string) *Timestamp {
	v, ok, err := q.f.Time(name)
	if err != nil {
		q.bad(err)
		return nil
	}
	if !ok {
		return nil
	}
	ts, err := fromEpoch(float64(v.UnixMilli()) / 1000)
	if err != nil {
		q.bad(&awsquery.ValueError{Name: name, Value: v.Format(time.RFC3339)})
		return nil
	}
	return &ts
}

// encodeQuery writes an operation's answer as query-protocol XML.
func encodeQuery(op, requestID string, out any) *awsquery.Writer {
	x := awsquery.NewResponse(op, xmlNamespace, requestID)
	switch o := out.(type) {
	case *getMetricStatisticsOutput:
		x.Text("Label", o.Label)
		x.Start("Datapoints")
		for _, dp := range o.Datapoints {
			x.Start("member")
			x.Time("Timestamp", dp.Timestamp.Time)
			for _, f := range []struct {
				name string
				v    *float64
			}{{"SampleCount", dp.SampleCount}, {"Average", dp.Average}, {"Sum", dp.Sum}, {"Minimum", dp.Minimum}, {"Maximum", dp.Maximum}} {
				if f.v != nil {
					x.Float(f.name, *f.v)
				}
			}
			if dp.Unit != "" {
				x.Text("Unit", dp.Unit)
			}
			if len(dp.ExtendedStatistics) > 0 {
				x.Start("ExtendedStatistics")
				for _, k := range sortedKeys(dp.ExtendedStatistics) {
					x.Start("entry")
					x.Text("key", k)
					x.Float("value", dp.ExtendedStatistics[k])
					x.End()
				}
				x.End()
			}
			x.End()
		}
		x.End()
	case *getMetricDataOutput:
		x.Start("MetricDataResults")
		for _, r := range o.MetricDataResults {
			x.Start("member")
			x.Text("Id", r.ID)
			x.Text("Label", r.Label)
			x.Start("Timestamps")
			for _, t := range r.Timestamps {
				x.Time("member", t.Time)
			}
			x.End()
			x.Start("Values")
			for _, v := range r.Values {
				x.Float("member", v)
			}
			x.End()
			x.Text("StatusCode", r.StatusCode)
			x.End()
		}
		x.End()
		if o.NextToken != nil {
			x.Text("NextToken", *o.NextToken)
		}
		x.Start("Messages")
		x.End()
	case *listMetricsOutput:
		x.Start("Metrics")
		for _, m := range o.Metrics {
			x.Start("member")
			x.Text("Namespace", *m.Namespace)
			x.Text("MetricName", *m.MetricName)
			x.Start("Dimensions")
			for _, d := range m.Dimensions {
				x.Start("member")
				x.Text("Name", d.Name)
				x.Text("Value", d.Value)
				x.End()
			}
			x.End()
			x.End()
		}
		x.End()
		if o.NextToken != nil {
			x.Text("NextToken", *o.NextToken)
		}
	default:
		encodeAlarmQuery(x, out)
	}
	return x
}

func sortedKeys(m map[string]float64) []string { return slices.Sorted(maps.Keys(m)) }

func timestampOf(sec int64) Timestamp { return Timestamp{time.Unix(sec, 0).UTC()} }
