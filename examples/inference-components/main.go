// Command inference-components drives SageMaker inference components on mce
// with aws-sdk-go-v2, as an application would against SageMaker itself: an
// endpoint whose variant names no model, two real models placed on it as
// components with their own copies and resources (a scikit-learn classifier
// with 2 copies, a PyTorch text generator with 1), calls to each by
// InferenceComponentName, one scaled to zero copies and back, and everything
// deleted again.
//
// Run it from the repository root while mce serves
// examples/inference-components/endpoint.yaml (see README.md):
//
//	go run ./examples/inference-components
//	go run ./examples/inference-components -endpoint shared -keep
//
// With -endpoint naming an endpoint that exists, the components go there and
// the endpoint is left alone; otherwise the program creates the endpoint (and
// its configuration) and deletes them at the end. -keep leaves the
// components in place, for `mce invoke --inference-component`.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"
)

const (
	classifier = "classifier" // scikit-learn, the cancer-v1 model of endpoint.yaml
	textgen    = "textgen"    // PyTorch, image and artifact given directly
	roleARN    = "arn:aws:iam::123456789012:role/mce-example"
)

func main() {
	url := flag.String("endpoint-url", "http://127.0.0.1:8080", "mce's address")
	endpoint := flag.String("endpoint", "ic-example", "endpoint to place the components on; created (and deleted at the end) when it does not exist")
	keep := flag.Bool("keep", false, "leave the components (and an endpoint this run created) in place")
	flag.Parse()
	log.SetFlags(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// mce without --credentials takes any signature; SageMaker would take
	// the usual credential chain (config.LoadDefaultConfig).
	creds := credentials.NewStaticCredentialsProvider("x", "x", "")
	sm := sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: url, Credentials: creds})
	rt := sagemakerruntime.New(sagemakerruntime.Options{Region: "us-east-1", BaseEndpoint: url, Credentials: creds})

	// 1. An endpoint for inference components: its variant has an instance
	// type and count but no ModelName, and the configuration an execution
	// role.
	created := false
	if _, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: endpoint}); err != nil {
		if !isValidation(err) {
			log.Fatal(err)
		}
		must(sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{
			EndpointConfigName: aws.String(*endpoint + "-config"),
			ExecutionRoleArn:   aws.String(roleARN),
			ProductionVariants: []smtypes.ProductionVariant{{
				VariantName: aws.String("AllTraffic"), InstanceType: smtypes.ProductionVariantInstanceTypeMlC5Large,
				InitialInstanceCount: aws.Int32(1),
				// How calls spread over a component's copies (the default).
				RoutingConfig: &smtypes.ProductionVariantRoutingConfig{RoutingStrategy: smtypes.RoutingStrategyLeastOutstandingRequests},
			}},
		}))
		must(sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: endpoint, EndpointConfigName: aws.String(*endpoint + "-config")}))
		w := sagemaker.NewEndpointInServiceWaiter(sm, func(o *sagemaker.EndpointInServiceWaiterOptions) { o.MinDelay = time.Second })
		if err := w.Wait(ctx, &sagemaker.DescribeEndpointInput{EndpointName: endpoint}, 2*time.Minute); err != nil {
			log.Fatal(err)
		}
		created = true
		fmt.Printf("endpoint %s: InService, no model of its own\n", *endpoint)
	} else {
		fmt.Printf("endpoint %s: exists, the components go there\n", *endpoint)
	}

	// 2. Two components, each with its own model, resources and copies.
	// One names a model (CreateModel, here from endpoint.yaml); the other
	// gives its image and artifact itself. mce reads file:// artifacts only
	// inside its model roots (serve --model-root).
	artifact, err := filepath.Abs("build/models/framework/textgen.tar.gz")
	if err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	must(sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{
		InferenceComponentName: aws.String(classifier), EndpointName: endpoint, VariantName: aws.String("AllTraffic"),
		Specification: &smtypes.InferenceComponentSpecification{
			ModelName: aws.String("cancer-v1"),
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{
				NumberOfCpuCoresRequired: aws.Float32(0.5), MinMemoryRequiredInMb: aws.Int32(512)},
		},
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(2)},
	}))
	must(sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{
		InferenceComponentName: aws.String(textgen), EndpointName: endpoint, VariantName: aws.String("AllTraffic"),
		Specification: &smtypes.InferenceComponentSpecification{
			Container: &smtypes.InferenceComponentContainerSpecification{
				Image:       aws.String("mce-framework/pytorch:latest"),
				ArtifactUrl: aws.String("file://" + artifact),
				Environment: map[string]string{"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
					"SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT": "text/plain", "SAGEMAKER_MODEL_SERVER_WORKERS": "1"},
			},
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{
				NumberOfCpuCoresRequired: aws.Float32(1), MinMemoryRequiredInMb: aws.Int32(1024)},
		},
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)},
	}))
	for _, name := range []string{classifier, textgen} {
		d := waitComponent(ctx, sm, name)
		fmt.Printf("component %s: %s, %d/%d copies (%.0f s after creation)\n", name, d.InferenceComponentStatus,
			aws.ToInt32(d.RuntimeConfig.CurrentCopyCount), aws.ToInt32(d.RuntimeConfig.DesiredCopyCount), time.Since(start).Seconds())
	}

	// 3. Each component answers by name.
	sample, err := os.ReadFile("build/models/framework/cancer-sample.csv")
	if err != nil {
		log.Fatal(err)
	}
	classify := func() (string, error) {
		out, err := rt.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{
			EndpointName: endpoint, InferenceComponentName: aws.String(classifier),
			ContentType: aws.String("text/csv"), Accept: aws.String("application/json"), Body: sample,
		})
		if err != nil {
			return "", err
		}
		var answer struct {
			Predictions []struct{ Label string } `json:"predictions"`
		}
		if err := json.Unmarshal(out.Body, &answer); err != nil {
			return "", fmt.Errorf("%w: %s", err, out.Body)
		}
		var labels []string
		for _, p := range answer.Predictions {
			labels = append(labels, p.Label)
		}
		return strings.Join(labels, " "), nil
	}
	labels, err := classify()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s\n", classifier, labels)
	out, err := rt.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{
		EndpointName: endpoint, InferenceComponentName: aws.String(textgen), ContentType: aws.String("application/json"),
		Body: []byte(`{"prompt": "This License", "max_tokens": 60, "temperature": 0, "seed": 0}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: This License%s\n", textgen, out.Body)

	// 4. Scale the classifier to zero copies: a call gets SageMaker's
	// answer for a component without capacity.
	scale(ctx, sm, classifier, 0)
	if _, err := classify(); err != nil {
		fmt.Printf("%s with 0 copies: %v\n", classifier, apiMessage(err))
	} else {
		log.Fatalf("%s answered with 0 copies", classifier)
	}

	// 5. And back to one copy, which answers again.
	start = time.Now()
	scale(ctx, sm, classifier, 1)
	if labels, err = classify(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s (%.0f s from 0 copies to the first answer)\n", classifier, labels, time.Since(start).Seconds())

	if *keep {
		fmt.Printf("kept: components %s and %s on endpoint %s\n", classifier, textgen, *endpoint)
		return
	}
	// 6. Delete everything this run made.
	for _, name := range []string{classifier, textgen} {
		must(sm.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String(name)}))
		for {
			_, err := sm.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String(name)})
			if isValidation(err) {
				break // Could not find inference component
			}
			if err != nil {
				log.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
		}
		fmt.Printf("component %s: deleted\n", name)
	}
	if created {
		must(sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: endpoint}))
		w := sagemaker.NewEndpointDeletedWaiter(sm, func(o *sagemaker.EndpointDeletedWaiterOptions) { o.MinDelay = time.Second })
		if err := w.Wait(ctx, &sagemaker.DescribeEndpointInput{EndpointName: endpoint}, 2*time.Minute); err != nil {
			log.Fatal(err)
		}
		must(sm.DeleteEndpointConfig(ctx, &sagemaker.DeleteEndpointConfigInput{EndpointConfigName: aws.String(*endpoint + "-config")}))
		fmt.Printf("endpoint %s and its configuration: deleted\n", *endpoint)
	}
}

// waitComponent polls DescribeInferenceComponent while the component is
// Creating or Updating, as the SageMaker Python SDK does (botocore has no
// waiter for components), and fails unless it ends InService.
func waitComponent(ctx context.Context, sm *sagemaker.Client, name string) *sagemaker.DescribeInferenceComponentOutput {
	for {
		d, err := sm.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String(name)})
		if err != nil {
			log.Fatal(err)
		}
		switch d.InferenceComponentStatus {
		case smtypes.InferenceComponentStatusCreating, smtypes.InferenceComponentStatusUpdating:
			time.Sleep(500 * time.Millisecond)
			continue
		case smtypes.InferenceComponentStatusInService:
			return d
		}
		log.Fatalf("component %s: %s: %s", name, d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
}

// scale sets a component's copy count and waits until it is InService.
func scale(ctx context.Context, sm *sagemaker.Client, name string, copies int32) {
	must(sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{
		InferenceComponentName: aws.String(name),
		DesiredRuntimeConfig:   &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(copies)},
	}))
	d := waitComponent(ctx, sm, name)
	fmt.Printf("component %s: %s, %d/%d copies\n", name, d.InferenceComponentStatus,
		aws.ToInt32(d.RuntimeConfig.CurrentCopyCount), aws.ToInt32(d.RuntimeConfig.DesiredCopyCount))
}

func must[T any](_ T, err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// isValidation reports whether err is the ValidationException SageMaker
// answers for a resource that does not exist.
func isValidation(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException"
}

// apiMessage is an API error's code and message, without the SDK's framing.
func apiMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	return err.Error()
}
