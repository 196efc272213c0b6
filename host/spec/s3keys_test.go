package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestS3KeySegmentsRefused: an s3:// location mce would read (model data,
// a folder of model data, SAGEMAKER_SUBMIT_DIRECTORY, an inference
// component's or adapter's ArtifactUrl) or write (asynchronous output
// paths) whose key has a ., .. or empty segment is refused, in an endpoint
// file as through the API (issue 26 item 6).
func TestS3KeySegmentsRefused(t *testing.T) {
	for name, body := range map[string]string{
		"ModelDataUrl": `Models: [{ModelName: m, PrimaryContainer: {Image: i, ModelDataUrl: "s3://b/x/../secret"}}]`,
		"S3Prefix": `Models: [{ModelName: m, PrimaryContainer: {Image: i, ModelDataSource: {S3DataSource:
  {S3Uri: "s3://b/a//", S3DataType: S3Prefix, CompressionType: None}}}}]`,
		"SUBMIT_DIRECTORY": `Models: [{ModelName: m, PrimaryContainer: {Image: i, Environment: {SAGEMAKER_SUBMIT_DIRECTORY: " s3://b/./code.tar.gz"}}}]`,
		"ArtifactUrl": `InferenceComponents: [{InferenceComponentName: c, EndpointName: e, VariantName: v,
  Specification: {Container: {Image: i, ArtifactUrl: "s3://b//m.tar.gz"}, ComputeResourceRequirements: {MinMemoryRequiredInMb: 128}},
  RuntimeConfig: {CopyCount: 1}}]`,
		"async output": `EndpointConfigs: [{EndpointConfigName: c, ProductionVariants: [{VariantName: v, ModelName: m, InitialInstanceCount: 1, InstanceType: ml.m5.large}],
  AsyncInferenceConfig: {OutputConfig: {S3OutputPath: "s3://b/out/../../elsewhere"}}}]`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "endpoints.yaml")
			if err := os.WriteFile(path, []byte(body+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadFiles(path)
			if err == nil || !strings.Contains(err.Error(), "path segment") || !strings.Contains(err.Error(), "is refused") {
				t.Errorf("err = %v, want the key's path segment refused", err)
			}
		})
	}
}
