package spec

import (
	"errors"
	"strings"
	"testing"
)

// TestDataCaptureConfigValidate decodes CreateEndpointConfig bodies with a
// DataCaptureConfig as boto3 sends them and checks the answer against
// SageMaker's constraints
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DataCaptureConfig.html,
// API_CaptureOption.html, API_CaptureContentTypeHeader.html): a valid
// configuration is accepted; the constraint failures come in SageMaker's
// words, and mce's own refusals (an https:// destination, a key with a ..
// segment) after them.
func TestDataCaptureConfigValidate(t *testing.T) {
	const (
		prefix1 = "1 validation error detected: "
		dc      = "dataCaptureConfig."
	)
	// body is a one-variant CreateEndpointConfig body with capture as
	// its DataCaptureConfig (a JSON object's members).
	body := func(capture string) string {
		return `{"EndpointConfigName":"ab-config","ProductionVariants":[{"VariantName":"AllTraffic","ModelName":"ab-model",` +
			`"InitialInstanceCount":1,"InstanceType":"ml.m5.large"}],"DataCaptureConfig":{` + capture + `}}`
	}
	const sdk = `"EnableCapture":true,"InitialSamplingPercentage":20,"DestinationS3Uri":"s3://bucket/model-monitor/data-capture",` +
		`"CaptureOptions":[{"CaptureMode":"Input"},{"CaptureMode":"Output"}],` +
		`"CaptureContentTypeHeader":{"CsvContentTypes":["text/csv"],"JsonContentTypes":["application/json"]}`
	long := "s3://bucket/" + strings.Repeat("k", 501) // 513 characters
	types11 := `"a/b","a/b","a/b","a/b","a/b","a/b","a/b","a/b","a/b","a/b","a/b"`
	tests := []struct {
		name, capture, want string
	}{
		// What the SageMaker Python SDK's DataCaptureConfig._to_request_dict sends.
		{"the SDK's configuration", sdk, ""},
		{"minimal", `"InitialSamplingPercentage":0,"DestinationS3Uri":"s3://b","CaptureOptions":[{"CaptureMode":"InputAndOutput"}]`, ""},
		{"KMS key ARN and alias", `"InitialSamplingPercentage":100,"DestinationS3Uri":"s3://b/p/","CaptureOptions":[{"CaptureMode":"Input"}],` +
			`"KmsKeyId":"arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"`, ""},
		{"required members", `"EnableCapture":false`, "3 validation errors detected: " +
			"Value null at '" + dc + "initialSamplingPercentage' failed to satisfy constraint: Member must not be null; " +
			"Value null at '" + dc + "destinationS3Uri' failed to satisfy constraint: Member must not be null; " +
			"Value null at '" + dc + "captureOptions' failed to satisfy constraint: Member must not be null"},
		{"sampling above 100", strings.Replace(sdk, `:20,`, `:101,`, 1),
			prefix1 + "Value '101' at '" + dc + "initialSamplingPercentage' failed to satisfy constraint: Member must have value less than or equal to 100"},
		{"negative sampling", strings.Replace(sdk, `:20,`, `:-1,`, 1),
			prefix1 + "Value '-1' at '" + dc + "initialSamplingPercentage' failed to satisfy constraint: Member must have value greater than or equal to 0"},
		{"destination not an S3 URI", strings.Replace(sdk, `s3://bucket/model-monitor/data-capture`, `/tmp/capture`, 1),
			prefix1 + "Value '/tmp/capture' at '" + dc + "destinationS3Uri' failed to satisfy constraint: Member must satisfy regular expression pattern: (https|s3)://([^/])/?(.*)"},
		{"destination too long", strings.Replace(sdk, `s3://bucket/model-monitor/data-capture`, long, 1),
			prefix1 + "Value '" + long + "' at '" + dc + "destinationS3Uri' failed to satisfy constraint: Member must have length less than or equal to 512"},
		{"https destination", strings.Replace(sdk, `s3://bucket/model-monitor/data-capture`, `https://bucket.s3.amazonaws.com/capture`, 1),
			`mce writes captured data to s3:// locations only; DestinationS3Uri "https://bucket.s3.amazonaws.com/capture" is an https:// URL.`},
		{"destination with a dot-dot segment", strings.Replace(sdk, `s3://bucket/model-monitor/data-capture`, `s3://bucket/capture/../secret`, 1),
			`The data capture destination "s3://bucket/capture/../secret" is refused: its key has a ".." path segment.` +
				" S3 takes such keys literally, but S3-compatible stores that keep objects as files resolve them to another object; name the object itself."},
		{"KMS key outside the pattern", sdk + `,"KmsKeyId":"key id"`,
			prefix1 + "Value 'key id' at '" + dc + "kmsKeyId' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9:/_-]*"},
		{"no capture options", strings.Replace(sdk, `[{"CaptureMode":"Input"},{"CaptureMode":"Output"}]`, `[]`, 1),
			prefix1 + "Value at '" + dc + "captureOptions' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{"33 capture options", strings.Replace(sdk, `[{"CaptureMode":"Input"},{"CaptureMode":"Output"}]`,
			`[`+strings.TrimSuffix(strings.Repeat(`{"CaptureMode":"Input"},`, 33), ",")+`]`, 1),
			prefix1 + "Value at '" + dc + "captureOptions' failed to satisfy constraint: Member must have length less than or equal to 32"},
		{"unknown and missing capture modes", strings.Replace(sdk, `[{"CaptureMode":"Input"},{"CaptureMode":"Output"}]`, `[{"CaptureMode":"REQUEST"},{}]`, 1),
			"2 validation errors detected: " +
				"Value 'REQUEST' at '" + dc + "captureOptions.1.member.captureMode' failed to satisfy constraint: Member must satisfy enum value set: [Input, Output, InputAndOutput]; " +
				"Value null at '" + dc + "captureOptions.2.member.captureMode' failed to satisfy constraint: Member must not be null"},
		{"empty content type list", strings.Replace(sdk, `["text/csv"]`, `[]`, 1),
			prefix1 + "Value at '" + dc + "captureContentTypeHeader.csvContentTypes' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{"11 content types", strings.Replace(sdk, `["application/json"]`, `[`+types11+`]`, 1),
			prefix1 + "Value at '" + dc + "captureContentTypeHeader.jsonContentTypes' failed to satisfy constraint: Member must have length less than or equal to 10"},
		{"content types outside the pattern", strings.Replace(sdk, `["text/csv"]`, `["text/csv; charset=utf-8","","application/vnd+json"]`, 1),
			"3 validation errors detected: " +
				"Value 'text/csv; charset=utf-8' at '" + dc + "captureContentTypeHeader.csvContentTypes.1.member' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9])*\\/[a-zA-Z0-9](-*[a-zA-Z0-9.])*; " +
				"Value '' at '" + dc + "captureContentTypeHeader.csvContentTypes.2.member' failed to satisfy constraint: Member must have length greater than or equal to 1; " +
				"Value 'application/vnd+json' at '" + dc + "captureContentTypeHeader.csvContentTypes.3.member' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9])*\\/[a-zA-Z0-9](-*[a-zA-Z0-9.])*"},
		{"content type too long", strings.Replace(sdk, `["text/csv"]`, `["text/`+strings.Repeat("c", 252)+`"]`, 1),
			prefix1 + "Value 'text/" + strings.Repeat("c", 252) + "' at '" + dc + "captureContentTypeHeader.csvContentTypes.1.member' failed to satisfy constraint: Member must have length less than or equal to 256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c CreateEndpointConfigInput
			if err := DecodeJSON([]byte(body(tt.capture)), &c); err != nil {
				t.Fatalf("DecodeJSON: %v", err)
			}
			if got := validationMessage(t, c.Validate()); got != tt.want {
				t.Errorf("Validate()\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}

// TestDataCaptureConfigDecode: the shape takes SageMaker's member names,
// exactly, and nothing else.
func TestDataCaptureConfigDecode(t *testing.T) {
	var c CreateEndpointConfigInput
	err := DecodeJSON([]byte(`{"EndpointConfigName":"c","DataCaptureConfig":{"InitialSamplingPercentage":5,"DestinationS3Uri":"s3://b/p","KmsKeyId":"alias/k",`+
		`"CaptureOptions":[{"CaptureMode":"Output"}],"CaptureContentTypeHeader":{"CsvContentTypes":["text/csv"],"JsonContentTypes":["application/json","application/jsonlines"]}}}`), &c)
	if err != nil {
		t.Fatal(err)
	}
	d := c.DataCaptureConfig
	if d == nil || *d.InitialSamplingPercentage != 5 || d.DestinationS3URI != "s3://b/p" || d.KMSKeyID != "alias/k" || d.EnableCapture != nil ||
		len(d.CaptureOptions) != 1 || d.CaptureOptions[0].CaptureMode != CaptureOutput ||
		d.CaptureContentTypeHeader == nil || len(d.CaptureContentTypeHeader.CSVContentTypes) != 1 || len(d.CaptureContentTypeHeader.JSONContentTypes) != 2 {
		t.Fatalf("decoded %+v", d)
	}
	for _, bad := range []string{
		`{"DataCaptureConfig":{"SamplingPercentage":5}}`,
		`{"DataCaptureConfig":{"destinationS3Uri":"s3://b"}}`,
		`{"DataCaptureConfig":{"InitialSamplingPercentage":"5"}}`,
		`{"DataCaptureConfig":{"CaptureOptions":[{"CaptureMode":"Input","Extra":1}]}}`,
	} {
		var c CreateEndpointConfigInput
		var de *DecodeError
		if err := DecodeJSON([]byte(bad), &c); !errors.As(err, &de) {
			t.Errorf("DecodeJSON(%s) = %v, want a *DecodeError", bad, err)
		}
	}
}
