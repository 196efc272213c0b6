package containers

import (
	"context"
	"strings"
)

// InstanceCapacity is what one instance of a variant offers the copies of
// inference components, where an engine packs them on one machine (the
// Docker engine's InstanceCapacity).
type InstanceCapacity struct {
	CPUs      float64
	MemoryMiB int64
	// GPUs are the machine's GPU device IDs (indexes or UUIDs) that copies
	// may take whole: a GPU in MIG mode is not among them.
	GPUs []string
	// Partitions are the MIG partitions of the machine's GPUs in MIG mode.
	Partitions []Partition
}

// migPrefix begins SageMaker's names of MIG profiles ("mig-3g.40gb"); NVIDIA
// names them without it ("3g.40gb").
const migPrefix = "mig-"

// NVIDIAProfile is NVIDIA's name of a MIG profile SageMaker names
// ("mig-3g.40gb" → "3g.40gb"), as nvidia-smi and the device plugin's
// resources spell it.
func NVIDIAProfile(profile string) string { return strings.TrimPrefix(profile, migPrefix) }

// SageMakerProfile is SageMaker's name of a MIG profile NVIDIA names
// ("3g.40gb" → "mig-3g.40gb"); "" (unknown) stays "".
func SageMakerProfile(profile string) string {
	if profile == "" {
		return ""
	}
	return migPrefix + profile
}

// Partition is one MIG partition a copy may occupy.
type Partition struct {
	// ID pins it to a container: its UUID ("MIG-…").
	ID string
	// Profile is SageMaker's name of its MIG profile ("mig-3g.40gb"); ""
	// when NVML's name for it does not say.
	Profile string
	// GPU is the index of the GPU it is carved from.
	GPU int
}

// AdapterStore is an Engine that gives the copies of inference components
// a folder of adapters (docker.Engine does): each copy of a component
// whose ContainerPlan has Adapters set sees, read-only at AdapterMount,
// the adapters staged for that component, also those staged after it
// started. The host then registers each adapter with the copy's
// container by the path returned.
type AdapterStore interface {
	// StageAdapter fetches artifactURL (s3:// or file://, a relative one
	// against baseDir; archives extracted as hostile input) into the
	// folder of component base on endpoint, as adapter name, replacing
	// what was there, and returns the adapter's path inside the copies.
	StageAdapter(ctx context.Context, endpoint, base, name, artifactURL, baseDir string) (string, error)
	// RemoveAdapter removes what StageAdapter staged; nothing staged is
	// no error.
	RemoveAdapter(endpoint, base, name string) error
}

// AdapterMount is where a copy of an inference component sees its
// adapters: AdapterMount/<adapter name>.
const AdapterMount = "/opt/ml/adapters"

// CopyNeeds is what one copy of an inference component asks for.
type CopyNeeds struct {
	CPUs      float64 // cores; 0: none asked
	MemoryMiB int64   // the minimum; 0: none asked
	GPUs      int     // whole GPUs
	// Partition is the MIG profile ("mig-3g.40gb") of which the copy
	// occupies one partition (AcceleratorPartitionType) instead of whole
	// GPUs; GPUs is then 0.
	Partition string
}

// CopyPlacer is an Engine that places the copies of inference components:
// for each new copy it decides which instance of the variant holds it, or
// that its launch decides, and which GPUs it gets, from what the copies
// placed already hold. docker.Engine packs them on its machine;
// kubernetes.Engine leaves them to its cluster's scheduler (LaunchPlacer).
// host keeps the copies' numbers, counts and statuses; where they go is the
// engine's answer. The copies of an engine that is no CopyPlacer are placed
// as LaunchPlacer places them: host knows nothing of that engine's
// capacity, so it invents none, and the launch is the judge.
type CopyPlacer interface {
	// PlaceCopies places up to req.Count new copies and returns where, in
	// order. Fewer come back when the others do not fit, and short then
	// names what is short, in the words of a FailureReason ("CPU cores (a
	// copy needs 9, an instance has at most 8 free of 8)"). An error places
	// none.
	PlaceCopies(ctx context.Context, req CopyRequest) (places []CopyPlace, short string, err error)
	// CopyFits is the pre-flight of a new specification: what an empty
	// instance of v could not offer one copy with n ("" when it could, or
	// when the engine cannot tell).
	CopyFits(ctx context.Context, v CopyVariant, n CopyNeeds) (short string, err error)
	// KeepsCopy reports whether a copy recorded at p on v is one this
	// engine could have placed there. One it could not (another engine's
	// record, an instance the variant no longer has) is placed again after
	// a restart.
	KeepsCopy(v CopyVariant, p CopyPlace) bool
}

// CopyVariant is the endpoint variant copies are placed on.
type CopyVariant struct {
	Endpoint     string
	Variant      string
	InstanceType string
	// Instances is the variant's instance count (InitialInstanceCount).
	Instances int
	// MaxInstances is how many instances the copies of all components on
	// the variant may occupy together (VariantPlan.CopyInstances).
	MaxInstances int
	// InstanceGPUs is how many GPUs an instance of InstanceType has;
	// AllGPUs: every GPU of the machine (local_gpu, or a GPU type mce does
	// not know).
	InstanceGPUs int
	AllGPUs      bool
	// Partitions is the variant's partition layout (VariantPlan.Partitions):
	// the MIG profiles each of its GPUs is carved into.
	Partitions []string
}

// CopyRequest asks for Count new copies of one component on a variant.
type CopyRequest struct {
	Variant CopyVariant
	Needs   CopyNeeds
	Count   int
	// Binpack fills the instances one after the other (PlacementStrategy
	// BINPACK); otherwise the copies spread over them, the instance with
	// the fewest copies of the component first (SPREAD).
	Binpack bool
	// Placed is every copy placed already, of every component on every
	// endpoint: a GPU pinned to one is the machine's, whatever endpoint
	// holds it.
	Placed []PlacedCopy
}

// PlacedCopy is a copy placed already.
type PlacedCopy struct {
	Endpoint string
	Variant  string
	CopyPlace
	// Needs is what the copy holds (the specification it runs: in a rolling
	// update, the new one or the one it replaces).
	Needs CopyNeeds
	// Own marks a copy of the component being placed, of its current
	// specification: SPREAD evens these out.
	Own bool
}

// CopyPlace is where a copy goes.
type CopyPlace struct {
	// Instance is the variant's instance that holds the copy, from 0; -1
	// where its launch decides (a cluster's scheduler picks the node).
	Instance int
	// GPUs are the device IDs pinned to the copy, or the UUID of its MIG
	// partition; none where its launch decides (its plan then asks for a
	// number of GPUs, or for a partition of a profile).
	GPUs []string
}

// LaunchPlacer places copies where their launch decides: every copy asked
// for is placed, on instance -1, with no GPU pinned (its plan asks for a
// number), and a launch that finds no room fails with an
// *UnschedulableError. The Kubernetes engine places so (its cluster's
// scheduler picks each copy's node), and so does host for an engine that
// is no CopyPlacer.
type LaunchPlacer struct{}

var _ CopyPlacer = LaunchPlacer{}

// PlaceCopies implements CopyPlacer: req.Count copies on instance -1.
func (LaunchPlacer) PlaceCopies(_ context.Context, req CopyRequest) ([]CopyPlace, string, error) {
	out := make([]CopyPlace, max(req.Count, 0))
	for i := range out {
		out[i].Instance = -1
	}
	return out, "", nil
}

// CopyFits implements CopyPlacer: it cannot tell.
func (LaunchPlacer) CopyFits(context.Context, CopyVariant, CopyNeeds) (string, error) { return "", nil }

// KeepsCopy implements CopyPlacer: where a copy is, its launch decided.
func (LaunchPlacer) KeepsCopy(CopyVariant, CopyPlace) bool { return true }

// UnschedulableError is a copy the engine's scheduler found no room for.
// Short names what was short, in SageMaker's words ("accelerator devices",
// "CPU cores", "memory", or "instances" when the variant's instance bound
// kept it off nodes that had room); Message is the whole sentence, with the
// scheduler's own words.
type UnschedulableError struct {
	Short   []string
	Message string
}

func (e *UnschedulableError) Error() string { return e.Message }
