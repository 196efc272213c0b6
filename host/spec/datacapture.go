package spec

import (
	"regexp"
	"strconv"
	"strings"
)

// DataCaptureConfig is CreateEndpointConfig's DataCaptureConfig
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DataCaptureConfig.html):
// which calls of the endpoint are recorded, and where the records go.
// host/capture carries it out; its format and behaviour are in
// docs/data-capture.md.
type DataCaptureConfig struct {
	// EnableCapture is true when unset ("defaults to enabled").
	EnableCapture *bool `json:"EnableCapture,omitempty"`
	// InitialSamplingPercentage (0–100, required) is the share of calls
	// captured.
	InitialSamplingPercentage *int32 `json:"InitialSamplingPercentage,omitempty"`
	// DestinationS3URI (required) is the S3 folder the records go under,
	// as DESTINATION/ENDPOINT/VARIANT/yyyy/mm/dd/hh/….jsonl.
	DestinationS3URI string `json:"DestinationS3Uri,omitempty"`
	// KMSKeyID is accepted and shown, not acted on: mce writes the
	// records with the store's default encryption.
	KMSKeyID string `json:"KmsKeyId,omitempty"`
	// CaptureOptions (1–32, required) say whether the request (Input), the
	// answer (Output) or both (InputAndOutput, or both entries) are kept.
	CaptureOptions []CaptureOption `json:"CaptureOptions,omitempty"`
	// CaptureContentTypeHeader lists the content types written as text;
	// without it every payload is written in base64, as SageMaker does.
	CaptureContentTypeHeader *CaptureContentTypeHeader `json:"CaptureContentTypeHeader,omitempty"`
}

// CaptureOption is one entry of DataCaptureConfig.CaptureOptions.
type CaptureOption struct {
	// CaptureMode is CaptureInput, CaptureOutput or CaptureInputAndOutput.
	CaptureMode string `json:"CaptureMode,omitempty"`
}

// CaptureContentTypeHeader lists the content types (the media type, without
// parameters) whose payloads are written as CSV or JSON text; others are
// written in base64.
type CaptureContentTypeHeader struct {
	CSVContentTypes  []string `json:"CsvContentTypes,omitempty"`
	JSONContentTypes []string `json:"JsonContentTypes,omitempty"`
}

// Capture modes of CaptureOption.
const (
	CaptureInput          = "Input"
	CaptureOutput         = "Output"
	CaptureInputAndOutput = "InputAndOutput"
)

// Constraints of DataCaptureConfig from SageMaker's service model.
const (
	maxCaptureOptions     = 32
	maxCaptureTypes       = 10
	maxCaptureTypeLen     = 256
	maxCaptureS3URILen    = 512
	captureKMSKeyPattern  = `[a-zA-Z0-9:/_-]*`
	captureTypePattern    = `[a-zA-Z0-9](-*[a-zA-Z0-9])*\/[a-zA-Z0-9](-*[a-zA-Z0-9.])*`
	captureSamplingMaxPct = 100
)

var (
	captureKMSKeyRe = regexp.MustCompile(`^` + captureKMSKeyPattern + `$`)
	captureTypeRe   = regexp.MustCompile(`^` + captureTypePattern + `$`)
)

// checkDataCapture checks DataCaptureConfig's members against SageMaker's
// constraints, with SageMaker's paths.
func checkDataCapture(c *checker, d *DataCaptureConfig) {
	if d == nil {
		return
	}
	const p = "dataCaptureConfig"
	if d.InitialSamplingPercentage == nil {
		c.fail("null", p+".initialSamplingPercentage", "Member must not be null")
	}
	c.intRange(p+".initialSamplingPercentage", d.InitialSamplingPercentage, 0, captureSamplingMaxPct)
	c.requiredStr(p+".destinationS3Uri", d.DestinationS3URI, maxCaptureS3URILen, s3PathRe, s3PathPattern)
	c.str(p+".kmsKeyId", d.KMSKeyID, maxKMSKeyIDLen, captureKMSKeyRe, captureKMSKeyPattern)
	if d.CaptureOptions == nil {
		c.fail("null", p+".captureOptions", "Member must not be null")
	} else {
		c.listLen(p+".captureOptions", len(d.CaptureOptions), 1, maxCaptureOptions)
	}
	for i, o := range d.CaptureOptions {
		path := member1(p+".captureOptions", i) + ".captureMode"
		if c.required(path, o.CaptureMode) {
			c.enum(path, o.CaptureMode, CaptureInput, CaptureOutput, CaptureInputAndOutput)
		}
	}
	if h := d.CaptureContentTypeHeader; h != nil {
		checkCaptureTypes(c, p+".captureContentTypeHeader.csvContentTypes", h.CSVContentTypes)
		checkCaptureTypes(c, p+".captureContentTypeHeader.jsonContentTypes", h.JSONContentTypes)
	}
}

// checkCaptureTypes checks one list of content types: absent, or 1–10
// entries of 1–256 characters of the pattern.
func checkCaptureTypes(c *checker, path string, types []string) {
	if types == nil {
		return
	}
	c.listLen(path, len(types), 1, maxCaptureTypes)
	for i, t := range types {
		p := member1(path, i)
		if t == "" {
			c.fail(quote(t), p, "Member must have length greater than or equal to 1")
			continue
		}
		c.str(p, t, maxCaptureTypeLen, captureTypeRe, captureTypePattern)
	}
}

// checkDataCaptureSemantics refuses what mce cannot write: an https://
// destination (mce writes through its S3 client, to s3:// locations) and a
// key S3-compatible stores resolve to another object.
func checkDataCaptureSemantics(s *semantic, d *DataCaptureConfig) {
	if d == nil {
		return
	}
	if strings.HasPrefix(d.DestinationS3URI, "https://") {
		s.add("mce writes captured data to s3:// locations only; DestinationS3Uri " + strconv.Quote(d.DestinationS3URI) + " is an https:// URL.")
	}
	checkS3Key(s, "The data capture destination", d.DestinationS3URI)
}
