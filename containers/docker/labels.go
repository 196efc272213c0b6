package docker

// Labels on every container and network mce creates. Orphan clean-up and the
// event watcher select on them, so they are the contract between one run of mce
// and the next.
const (
	LabelManaged   = "io.mce.managed"   // always "true"
	LabelInstance  = "io.mce.instance"  // the mce instance name (Options.Instance)
	LabelEndpoint  = "io.mce.endpoint"  // EndpointName
	LabelVariant   = "io.mce.variant"   // VariantName
	LabelCopy      = "io.mce.copy"      // which copy of the variant's container set, from 0
	LabelContainer = "io.mce.container" // ContainerHostname
	// LabelGeneration tells the container sets of one endpoint apart while an
	// update runs the new set beside the old.
	LabelGeneration = "io.mce.generation"
	// LabelSpec fingerprints the variant's container definitions; a restarted
	// mce adopts a running container only when its fingerprint matches.
	LabelSpec = "io.mce.spec"
	// LabelShadow is "true" on the containers of a shadow variant
	// (ShadowProductionVariants), absent elsewhere: `docker ps --filter
	// label=io.mce.shadow=true` lists them.
	LabelShadow = "io.mce.shadow"
)

// LabelBindToPort is the image label SageMaker requires of containers that
// run in a pipeline or multi-container endpoint (https://docs.aws.amazon.com/sagemaker/latest/dg/inference-pipeline-real-time.html).
const LabelBindToPort = "com.amazonaws.sagemaker.capabilities.accept-bind-to-port"

func (rt *Runtime) labels(endpoint string) map[string]string {
	return map[string]string{
		LabelManaged:  "true",
		LabelInstance: rt.opts.Instance,
		LabelEndpoint: endpoint,
	}
}
