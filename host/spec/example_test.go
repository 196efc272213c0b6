package spec_test

import (
	"errors"
	"fmt"

	"github.com/mce-run/mce/host/spec"
)

func ExampleLoadFiles() {
	b, err := spec.LoadFiles("testdata/ab-test.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	plans, warnings, err := b.Plans("us-east-1", "123456789012")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range plans {
		fmt.Println(p.Name, p.Mode)
		for _, v := range p.Variants {
			for _, c := range v.Containers {
				fmt.Printf("  %s/%s %s gpus=%q\n", v.Name, c.Hostname, c.Image, c.GPUs)
			}
		}
	}
	for _, w := range warnings {
		fmt.Println("warning:", w)
	}
	// Output:
	// ab-test Direct
	//   v1/english mce-example/sentiment:latest gpus=""
	//   v1/german mce-example/sentiment:latest gpus=""
	//   v2/english mce-example/sentiment:v2 gpus="4"
	//   v2/german mce-example/sentiment:v2 gpus="device=1"
	// warning: testdata/ab-test.yaml: model "ab-model": ExecutionRoleArn ignored locally
}

func ExampleCreateModelInput_Validate() {
	// The control-plane API decodes a CreateModel body and validates it.
	body := []byte(`{"ModelName": "ab-model", "Containers": [
		{"ContainerHostname": "english", "Image": "img"},
		{"ContainerHostname": "x y", "Image": "img"}]}`)
	var in spec.CreateModelInput
	if err := spec.DecodeJSON(body, &in); err != nil {
		fmt.Println(err)
		return
	}
	var ve *spec.ValidationError
	if err := in.Validate(); errors.As(err, &ve) {
		fmt.Println(ve.Message())
	}
	// Output:
	// 1 validation error detected: Value 'x y' at 'containers.2.member.containerHostname' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}
}

func ExampleARN() {
	fmt.Println(spec.ARN("us-east-1", "123456789012", spec.KindEndpoint, "AB-Test"))
	// Output: arn:aws:sagemaker:us-east-1:123456789012:endpoint/ab-test
}
