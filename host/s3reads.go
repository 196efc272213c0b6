package host

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
)

// S3 reads on a caller's behalf. SageMaker reads model data with the
// execution role the caller passes (and is allowed to pass); mce has one
// S3 identity for every caller, so, as for asynchronous inputs
// (async_handler.go), a control-plane call that makes mce read S3 needs
// the caller's own s3:GetObject on what is read: CreateModel's model data
// (ModelDataUrl, ModelDataSource.S3DataSource.S3Uri) and s3://
// SAGEMAKER_SUBMIT_DIRECTORY, CreateInferenceComponent's and
// UpdateInferenceComponent's Container.ArtifactUrl (adapters' too) and
// their s3:// SAGEMAKER_SUBMIT_DIRECTORY. It is decided with the call's
// own authorization, before the call runs and before anything looks at
// S3, so the answer is the same whether the object exists or not, and a
// caller who is refused never makes mce read, list or stat anything.
//
// A folder (S3Prefix model data, an ArtifactUrl ending in "/") or a
// multi-model prefix is read object by object: it needs s3:ListBucket on
// the bucket (arn:aws:s3:::bucket, as S3's ListObjectsV2 does) and
// s3:GetObject on arn:aws:s3:::bucket/prefix* and on one object under the
// prefix for each pattern of the caller's statements that singles one out
// there (authz.PrefixProbes), so that a Deny of one object inside it
// refuses the folder. The s3:prefix condition key is not set.
//
// Writes likewise: CreateEndpointConfig's DataCaptureConfig makes mce
// write capture files under DestinationS3Uri, so the caller needs
// s3:PutObject on arn:aws:s3:::bucket/prefix/* and on the probes of its
// statements there, as for a folder read.
//
// Endpoint files (mce serve -f) are the operator's and are not authorized;
// neither are components by ModelName, whose model's data was authorized
// for the model's creator.

const actionS3ListBucket = "s3:ListBucket"

// actionS3PutObject is what a caller needs under a data capture
// destination.
const actionS3PutObject = "s3:PutObject"

// actionS3GetObject is the IAM action a caller needs on an object mce reads
// for it (an asynchronous input, model data).
const actionS3GetObject = "s3:GetObject"

// s3ObjectARN is the ARN of the object at s3://bucket/key.
func s3ObjectARN(url string) string {
	return "arn:aws:s3:::" + strings.TrimPrefix(url, "s3://")
}

// s3Read is one S3 location a call makes mce read.
type s3Read struct {
	member string // what the call names it, for messages
	url    string
	prefix bool // every object under it
	write  bool // objects mce writes under it (a prefix)
}

// s3ReadsOf lists the s3:// locations the decoded input makes mce read.
func s3ReadsOf(in any) []s3Read {
	var out []s3Read
	add := func(member, url string, prefix bool) {
		url = strings.TrimSpace(url)
		if strings.HasPrefix(url, "s3://") {
			out = append(out, s3Read{member: member, url: url, prefix: prefix || strings.HasSuffix(url, "/")})
		}
	}
	component := func(sp *spec.InferenceComponentSpecification) {
		if sp != nil && sp.Container != nil {
			add("Container.ArtifactUrl", sp.Container.ArtifactURL, false)
			add("Container.Environment "+spec.SubmitDirEnv, sp.Container.Environment[spec.SubmitDirEnv], false)
		}
	}
	switch v := in.(type) {
	case *spec.CreateModelInput:
		defs := v.Containers
		if v.PrimaryContainer != nil {
			defs = append([]spec.ContainerDefinition{*v.PrimaryContainer}, defs...)
		}
		for i, d := range defs {
			name := d.ContainerHostname
			if name == "" {
				name = strconv.Itoa(i + 1)
			}
			add("The model data of container "+strconv.Quote(name), d.ModelData(), d.Mode == spec.ModeMultiModel)
			add(spec.SubmitDirEnv+" of container "+strconv.Quote(name), d.Environment[spec.SubmitDirEnv], false)
			for _, ch := range d.AdditionalModelData() {
				add("The additional model data (channel "+strconv.Quote(ch.Channel)+") of container "+strconv.Quote(name), ch.URL, false)
			}
		}
	case *spec.CreateInferenceComponentInput:
		component(v.Specification)
	case *updateComponentInput:
		component(v.Specification)
	case *spec.CreateEndpointConfigInput:
		if d := v.DataCaptureConfig; d != nil && strings.HasPrefix(d.DestinationS3URI, "s3://") {
			out = append(out, s3Read{member: "DataCaptureConfig.DestinationS3Uri", url: d.DestinationS3URI, prefix: true, write: true})
		}
	}
	return out
}

// authorizeReads authorizes principal p's reads (see above); nil means go
// ahead. A location with a key mce refuses is a ValidationException, before
// any decision.
func (g *gate) authorizeReads(ctx context.Context, r *http.Request, p authz.Principal, reads []s3Read) *apierr.Error {
	for _, rd := range reads {
		if msg := spec.S3KeyProblem(rd.member, rd.url); msg != "" {
			return apierr.ValidationException("%s", msg)
		}
		if !g.enabled() {
			continue
		}
		if !rd.prefix {
			if api := g.decide(ctx, r, p, actionS3GetObject, s3ObjectARN(rd.url), nil); api != nil {
				return api
			}
			continue
		}
		bucket, key, _ := strings.Cut(strings.TrimPrefix(rd.url, "s3://"), "/")
		if key != "" && !strings.HasSuffix(key, "/") {
			key += "/" // a multi-model prefix is a folder (mme.CacheOptions.Prefix)
		}
		action := actionS3GetObject
		if rd.write {
			action = actionS3PutObject
		} else if api := g.decide(ctx, r, p, actionS3ListBucket, "arn:aws:s3:::"+bucket, nil); api != nil {
			return api
		}
		under := "arn:aws:s3:::" + bucket + "/" + key
		for _, res := range append([]string{under + "*"}, g.az.PrefixProbes(p, under)...) {
			if api := g.decide(ctx, r, p, action, res, nil); api != nil {
				return api
			}
		}
	}
	return nil
}
