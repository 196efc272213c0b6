package spec

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Container modes and inference execution modes.
const (
	ModeSingleModel = "SingleModel"
	ModeMultiModel  = "MultiModel"
	ModeSerial      = "Serial"
	ModeDirect      = "Direct"
)

// HostnamePrimary is the hostname of a model's PrimaryContainer.
const HostnamePrimary = "primary"

// Validate checks a CreateModel request against SageMaker's rules
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModel.html)
// and mce's limits. Constraint failures come first, all together, as
// SageMaker reports them; only a request free of them gets the semantic
// checks. The error is a *ValidationError.
func (m *CreateModelInput) Validate() error {
	var c checker
	c.requiredStr("modelName", m.ModelName, maxNameLen, modelNameRe, modelNamePattern)
	if m.PrimaryContainer != nil {
		checkContainer(&c, "primaryContainer", m.PrimaryContainer)
	}
	c.listLen("containers", len(m.Containers), 0, maxContainers)
	for i := range m.Containers {
		checkContainer(&c, member1("containers", i), &m.Containers[i])
	}
	if m.InferenceExecutionConfig != nil {
		if c.required("inferenceExecutionConfig.mode", m.InferenceExecutionConfig.Mode) {
			c.enum("inferenceExecutionConfig.mode", m.InferenceExecutionConfig.Mode, ModeSerial, ModeDirect)
		}
	}
	c.roleARN("executionRoleArn", m.ExecutionRoleARN)
	c.tags("tags", m.Tags)
	if err := c.err(); err != nil {
		return err
	}
	return m.semantics().err()
}

func checkContainer(c *checker, p string, d *ContainerDefinition) {
	c.str(p+".containerHostname", d.ContainerHostname, maxNameLen, entityNameRe, entityNamePattern)
	c.str(p+".image", d.Image, maxImageLen, imageRe, imagePattern)
	if d.ImageConfig != nil {
		mode := d.ImageConfig.RepositoryAccessMode
		if c.required(p+".imageConfig.repositoryAccessMode", mode) {
			c.enum(p+".imageConfig.repositoryAccessMode", mode, "Platform", "Vpc")
		}
	}
	c.enum(p+".mode", d.Mode, ModeSingleModel, ModeMultiModel)
	c.str(p+".modelDataUrl", d.ModelDataURL, maxModelDataURLLen, modelDataURLRe, modelDataURLPattern)
	checkModelDataSource(c, p, d)
	checkAdditionalSources(c, p, d)
	checkEnvironment(c, p+".environment", d.Environment)
	if d.MultiModelConfig != nil {
		c.enum(p+".multiModelConfig.modelCacheSetting", d.MultiModelConfig.ModelCacheSetting, "Enabled", "Disabled")
	}
	if r := d.Resources; r != nil {
		if _, err := ParseGPUs(r.Gpus); err != nil {
			c.fail(quote(r.Gpus), p+".resources.gpus", `Member must be "all", "none", a GPU count, or GPU device IDs such as "device=0,1" (mce)`)
		}
		if r.Cpus < 0 || math.IsNaN(r.Cpus) || math.IsInf(r.Cpus, 0) {
			c.fail(quote(formatFloat(r.Cpus)), p+".resources.cpus", "Member must have value greater than or equal to 0")
		}
		if r.MemoryMiB < 0 {
			c.fail(quote(strconv.FormatInt(r.MemoryMiB, 10)), p+".resources.memoryMiB", "Member must have value greater than or equal to 0")
		}
	}
}

// checkEnvironment applies the per-container Environment limits; the total
// across a model is a semantic check.
func checkEnvironment(c *checker, p string, env map[string]string) {
	if len(env) > maxEnvEntries {
		c.fail("", p, "Member must have length less than or equal to "+strconv.Itoa(maxEnvEntries))
	}
	keys := sortedKeys(env)
	for _, k := range keys {
		if utf8.RuneCountInString(k) > maxEnvKeyLen || !envKeyRe.MatchString(k) {
			c.fail(quote(k), p, "Map keys must satisfy constraint: [Member must have length less than or equal to "+
				strconv.Itoa(maxEnvKeyLen)+", Member must satisfy regular expression pattern: "+envKeyPattern+"]")
		}
	}
	for _, k := range keys {
		if utf8.RuneCountInString(env[k]) > maxEnvValueLen {
			// The value itself may be long or secret; SageMaker-style, name the key.
			c.fail(quote(k), p, "Map value must satisfy constraint: [Member must have length less than or equal to "+
				strconv.Itoa(maxEnvValueLen)+", Member must satisfy regular expression pattern: "+envValuePattern+"]")
		}
	}
}

// semantics checks the rules that relate members to each other; it assumes
// the constraint checks passed.
func (m *CreateModelInput) semantics() *semantic {
	var s semantic
	switch {
	case m.PrimaryContainer != nil && len(m.Containers) > 0:
		s.add("Specify either PrimaryContainer or Containers, not both.")
		return &s
	case m.PrimaryContainer == nil && len(m.Containers) == 0:
		s.add("Either PrimaryContainer or Containers must be specified.")
		return &s
	}
	mode := m.ExecutionMode()
	if m.PrimaryContainer != nil && mode == ModeDirect {
		s.add("InferenceExecutionConfig Mode Direct requires Containers; a PrimaryContainer cannot be invoked directly.")
	}
	defs, names := m.containers()
	envTotal := 0
	multi := 0
	for i, d := range defs {
		for _, field := range d.refused() {
			s.add(field + " is not supported by mce (container " + strconv.Quote(names[i]) + "): give the container's Image, and its ModelDataUrl when it needs artifacts.")
		}
		modelDataSourceSemantics(&s, " (container "+strconv.Quote(names[i])+")", d)
		additionalSourcesSemantics(&s, " (container "+strconv.Quote(names[i])+")", d)
		checkS3Key(&s, "The model data of container "+strconv.Quote(names[i]), d.ModelData())
		checkS3Key(&s, SubmitDirEnv+" of container "+strconv.Quote(names[i]), d.Environment[SubmitDirEnv])
		if d.Image == "" && d.ModelPackageName == "" {
			s.add("Container " + strconv.Quote(names[i]) + " has no Image; mce runs every container from its Image.")
		}
		if d.Mode == ModeMultiModel {
			multi++
			if d.ModelDataURL == "" {
				s.add("Container " + strconv.Quote(names[i]) + " is in MultiModel mode and needs a ModelDataUrl: the prefix under which the TargetModel artifacts live.")
			}
		}
		for k, v := range d.Environment {
			envTotal += len(k) + len(v)
		}
	}
	if multi > 1 {
		s.add("More than one container in MultiModel mode is not supported with inference pipeline.")
	}
	if envTotal > maxEnvTotal {
		s.add("The Environment of all containers of a model may hold at most " + strconv.Itoa(maxEnvTotal) +
			" bytes of keys and values; model " + strconv.Quote(m.ModelName) + " has " + strconv.Itoa(envTotal) + ".")
	}
	if len(m.Containers) > 0 {
		checkHostnames(&s, m.Containers, mode)
	}
	return &s
}

func checkHostnames(s *semantic, cs []ContainerDefinition, mode string) {
	named := 0
	firstUnnamed := -1
	for i, d := range cs {
		if d.ContainerHostname != "" {
			named++
		} else if firstUnnamed < 0 {
			firstUnnamed = i
		}
	}
	switch {
	case mode == ModeDirect && firstUnnamed >= 0:
		s.add("ContainerHostname must be specified for every container when InferenceExecutionConfig Mode is Direct; container " +
			strconv.Itoa(firstUnnamed+1) + " has none.")
	case named > 0 && firstUnnamed >= 0:
		s.add("If ContainerHostname is specified for one container it must be specified for all containers; container " +
			strconv.Itoa(firstUnnamed+1) + " has none.")
	}
	first := map[string]int{}
	for i, d := range cs {
		if d.ContainerHostname == "" {
			continue
		}
		key := strings.ToLower(d.ContainerHostname) // a DNS name
		if j, dup := first[key]; dup {
			s.add("ContainerHostname must be unique within a model; " + strconv.Quote(d.ContainerHostname) +
				" is used by containers " + strconv.Itoa(j+1) + " and " + strconv.Itoa(i+1) + ".")
			continue
		}
		first[key] = i
	}
}

// ExecutionMode is the model's InferenceExecutionConfig Mode, "Serial" when
// it is absent.
func (m *CreateModelInput) ExecutionMode() string {
	if m.InferenceExecutionConfig == nil || m.InferenceExecutionConfig.Mode == "" {
		return ModeSerial
	}
	return m.InferenceExecutionConfig.Mode
}

// containers lists the model's container definitions with the hostnames
// they run under: ContainerHostname when given, else container-N by
// position (1-based), and "primary" for a PrimaryContainer. The hostname
// scheme for unnamed containers follows the names in SageMaker's messages
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html#API_runtime_InvokeEndpoint_Errors, https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ContainerDefinition.html); SageMaker's own scheme is unconfirmed.
func (m *CreateModelInput) containers() ([]*ContainerDefinition, []string) {
	if m.PrimaryContainer != nil && len(m.Containers) == 0 {
		return []*ContainerDefinition{m.PrimaryContainer}, []string{HostnamePrimary}
	}
	defs := make([]*ContainerDefinition, len(m.Containers))
	names := make([]string, len(m.Containers))
	for i := range m.Containers {
		defs[i] = &m.Containers[i]
		names[i] = m.Containers[i].ContainerHostname
		if names[i] == "" {
			names[i] = "container-" + strconv.Itoa(i+1)
		}
	}
	return defs, names
}

// refused lists the members mce cannot honour locally.
func (d *ContainerDefinition) refused() []string {
	var out []string
	if d.ModelPackageName != "" {
		out = append(out, "ModelPackageName")
	}
	if d.InferenceSpecificationName != "" {
		out = append(out, "InferenceSpecificationName")
	}
	return out
}

// Warnings lists the members of a valid request that mce accepts but does
// not act on, e.g. `model "ab": VpcConfig ignored locally`.
func (m *CreateModelInput) Warnings() []string {
	var w warnings
	w.prefix = "model " + strconv.Quote(m.ModelName) + ": "
	w.ifSet(m.ExecutionRoleARN != "", "ExecutionRoleArn")
	w.ifSet(m.VpcConfig != nil, "VpcConfig")
	if m.PrimaryContainer != nil && len(m.Containers) == 0 && m.PrimaryContainer.ContainerHostname != "" {
		w.add("PrimaryContainer.ContainerHostname ignored: a PrimaryContainer is always named " + strconv.Quote(HostnamePrimary))
	}
	defs, names := m.containers()
	for i, d := range defs {
		in := " (container " + strconv.Quote(names[i]) + ")"
		w.ifSet(d.ImageConfig != nil, "ImageConfig"+in)
		w.ifSet(present(d.ContainerMetricsConfig), "ContainerMetricsConfig"+in)
		if d.MultiModelConfig != nil && d.Mode != ModeMultiModel {
			w.add("MultiModelConfig ignored" + in + ": the container is not in MultiModel mode")
		}
	}
	return w.list
}

type warnings struct {
	prefix string
	list   []string
}

func (w *warnings) add(msg string) { w.list = append(w.list, w.prefix+msg) }

func (w *warnings) ifSet(set bool, field string) {
	if set {
		w.add(field + " ignored locally")
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
