package cloudwatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// The operations' inputs and outputs, named as CloudWatch's API reference
// names their members. Every protocol decodes to the same input structs and
// encodes the same output structs: JSON 1.0 and CBOR through these tags,
// the query protocol through query.go, which fills and reads them by hand.

// Dimension is a name/value pair that is part of a metric's identity.
type Dimension struct {
	Name  string `json:"Name" cbor:"Name"`
	Value string `json:"Value" cbor:"Value"`
}

// DimensionFilter selects metrics of ListMetrics by a dimension's name and,
// when Value is set, its value.
type DimensionFilter struct {
	Name  *string `json:"Name" cbor:"Name"`
	Value *string `json:"Value" cbor:"Value"`
}

// Metric names a metric: namespace, name and dimensions.
type Metric struct {
	Namespace  *string     `json:"Namespace,omitempty" cbor:"Namespace,omitempty"`
	MetricName *string     `json:"MetricName,omitempty" cbor:"MetricName,omitempty"`
	Dimensions []Dimension `json:"Dimensions" cbor:"Dimensions"`
}

type getMetricStatisticsInput struct {
	Namespace          *string     `json:"Namespace" cbor:"Namespace"`
	MetricName         *string     `json:"MetricName" cbor:"MetricName"`
	Dimensions         []Dimension `json:"Dimensions" cbor:"Dimensions"`
	StartTime          *Timestamp  `json:"StartTime" cbor:"StartTime"`
	EndTime            *Timestamp  `json:"EndTime" cbor:"EndTime"`
	Period             *int32      `json:"Period" cbor:"Period"`
	Statistics         []string    `json:"Statistics" cbor:"Statistics"`
	ExtendedStatistics []string    `json:"ExtendedStatistics" cbor:"ExtendedStatistics"`
	Unit               *string     `json:"Unit" cbor:"Unit"`
}

// Datapoint is one period's statistics of GetMetricStatistics.
type Datapoint struct {
	Timestamp          Timestamp          `json:"Timestamp" cbor:"Timestamp"`
	SampleCount        *float64           `json:"SampleCount,omitempty" cbor:"SampleCount,omitempty"`
	Average            *float64           `json:"Average,omitempty" cbor:"Average,omitempty"`
	Sum                *float64           `json:"Sum,omitempty" cbor:"Sum,omitempty"`
	Minimum            *float64           `json:"Minimum,omitempty" cbor:"Minimum,omitempty"`
	Maximum            *float64           `json:"Maximum,omitempty" cbor:"Maximum,omitempty"`
	Unit               string             `json:"Unit,omitempty" cbor:"Unit,omitempty"`
	ExtendedStatistics map[string]float64 `json:"ExtendedStatistics,omitempty" cbor:"ExtendedStatistics,omitempty"`
}

type getMetricStatisticsOutput struct {
	Label      string      `json:"Label" cbor:"Label"`
	Datapoints []Datapoint `json:"Datapoints" cbor:"Datapoints"`
}

type metricStat struct {
	Metric *Metric `json:"Metric" cbor:"Metric"`
	Period *int32  `json:"Period" cbor:"Period"`
	Stat   *string `json:"Stat" cbor:"Stat"`
	Unit   *string `json:"Unit" cbor:"Unit"`
}

type metricDataQuery struct {
	ID         *string     `json:"Id" cbor:"Id"`
	MetricStat *metricStat `json:"MetricStat" cbor:"MetricStat"`
	Expression *string     `json:"Expression" cbor:"Expression"`
	Label      *string     `json:"Label" cbor:"Label"`
	ReturnData *bool       `json:"ReturnData" cbor:"ReturnData"`
	Period     *int32      `json:"Period" cbor:"Period"`
	AccountID  *string     `json:"AccountId" cbor:"AccountId"`
}

type labelOptions struct {
	Timezone *string `json:"Timezone" cbor:"Timezone"`
}

type getMetricDataInput struct {
	MetricDataQueries []metricDataQuery `json:"MetricDataQueries" cbor:"MetricDataQueries"`
	StartTime         *Timestamp        `json:"StartTime" cbor:"StartTime"`
	EndTime           *Timestamp        `json:"EndTime" cbor:"EndTime"`
	NextToken         *string           `json:"NextToken" cbor:"NextToken"`
	ScanBy            *string           `json:"ScanBy" cbor:"ScanBy"`
	MaxDatapoints     *int32            `json:"MaxDatapoints" cbor:"MaxDatapoints"`
	LabelOptions      *labelOptions     `json:"LabelOptions" cbor:"LabelOptions"`
}

// MessageData is a message of GetMetricData.
type MessageData struct {
	Code  string `json:"Code" cbor:"Code"`
	Value string `json:"Value" cbor:"Value"`
}

type metricDataResult struct {
	ID         string        `json:"Id" cbor:"Id"`
	Label      string        `json:"Label" cbor:"Label"`
	Timestamps []Timestamp   `json:"Timestamps" cbor:"Timestamps"`
	Values     []float64     `json:"Values" cbor:"Values"`
	StatusCode string        `json:"StatusCode" cbor:"StatusCode"`
	Messages   []MessageData `json:"Messages,omitempty" cbor:"Messages,omitempty"`
}

type getMetricDataOutput struct {
	MetricDataResults []metricDataResult `json:"MetricDataResults" cbor:"MetricDataResults"`
	NextToken         *string            `json:"NextToken,omitempty" cbor:"NextToken,omitempty"`
	Messages          []MessageData      `json:"Messages" cbor:"Messages"`
}

type listMetricsInput struct {
	Namespace             *string           `json:"Namespace" cbor:"Namespace"`
	MetricName            *string           `json:"MetricName" cbor:"MetricName"`
	Dimensions            []DimensionFilter `json:"Dimensions" cbor:"Dimensions"`
	NextToken             *string           `json:"NextToken" cbor:"NextToken"`
	RecentlyActive        *string           `json:"RecentlyActive" cbor:"RecentlyActive"`
	IncludeLinkedAccounts *bool             `json:"IncludeLinkedAccounts" cbor:"IncludeLinkedAccounts"`
	OwningAccount         *string           `json:"OwningAccount" cbor:"OwningAccount"`
}

type listMetricsOutput struct {
	Metrics   []Metric `json:"Metrics" cbor:"Metrics"`
	NextToken *string  `json:"NextToken,omitempty" cbor:"NextToken,omitempty"`
}

// Timestamp is a point in time as the protocols carry it: epoch seconds, a
// JSON number in AWS JSON 1.0, CBOR tag 1 over an integer or a float in
// RPC v2 CBOR (smithy.protocols#rpcv2Cbor), ISO 8601 in the query protocol.
// mce keeps milliseconds.
type Timestamp struct{ time.Time }

// maxEpoch bounds the timestamps mce accepts (year 5138): past it time
// arithmetic in seconds overflows nothing, but no datapoint can exist.
const maxEpoch = 1e11

var errTimestamp = errors.New("not a timestamp")

func fromEpoch(f float64) (Timestamp, error) {
	if math.IsNaN(f) || f < -maxEpoch || f > maxEpoch {
		return Timestamp{}, errTimestamp
	}
	ms := int64(math.Round(f * 1000))
	return Timestamp{time.UnixMilli(ms).UTC()}, nil
}

func (t Timestamp) epoch() float64 { return float64(t.UnixMilli()) / 1000 }

// UnmarshalJSON reads epoch seconds.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return errTimestamp
	}
	v, err := fromEpoch(f)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// MarshalJSON writes epoch seconds with milliseconds.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, t.epoch(), 'f', -1, 64), nil
}

// UnmarshalCBOR reads tag 1 over an integer or a float (half, single or
// double precision), as the Smithy RPC v2 CBOR protocol requires.
func (t *Timestamp) UnmarshalCBOR(b []byte) error {
	var tag cbor.RawTag
	if err := cborDec.Unmarshal(b, &tag); err != nil {
		return errTimestamp
	}
	if tag.Number != 1 {
		return errTimestamp
	}
	var f float64
	if err := cborDec.Unmarshal(tag.Content, &f); err != nil {
		return errTimestamp
	}
	v, err := fromEpoch(f)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// MarshalCBOR writes tag 1 over a double, as aws-sdk-go-v2 writes its own.
func (t Timestamp) MarshalCBOR() ([]byte, error) {
	b := make([]byte, 0, 10)
	b = append(b, 0xc1, 0xfb) // tag 1, major 7 double
	return binary.BigEndian.AppendUint64(b, math.Float64bits(t.epoch())), nil
}
