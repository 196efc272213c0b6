package spec

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mce-run/mce/containers"
)

// Source says where a definition came from.
type Source struct {
	File string // the path as given to LoadFiles
	Dir  string // absolute folder of File; relative file:// URLs resolve here
	Path string // the definition inside File, e.g. "Models[0]"
}

// Model is a CreateModel request loaded from a file.
type Model struct {
	CreateModelInput
	Source
}

// EndpointConfig is a CreateEndpointConfig request loaded from a file.
type EndpointConfig struct {
	CreateEndpointConfigInput
	Source
}

// Endpoint is a CreateEndpoint request loaded from a file.
type Endpoint struct {
	CreateEndpointInput
	Source
}

// InferenceComponent is a CreateInferenceComponent request loaded from a
// file; a relative file:// Container.ArtifactUrl resolves against Dir.
type InferenceComponent struct {
	CreateInferenceComponentInput
	Source
}

// Bundle is the definitions of one or more endpoint files, in file order.
// Names are global across its files. A Bundle is not safe for concurrent
// mutation; Plans only reads it.
type Bundle struct {
	Models          []Model
	EndpointConfigs []EndpointConfig
	Endpoints       []Endpoint
	// InferenceComponents are applied after the endpoints.
	InferenceComponents []InferenceComponent
}

// LoadFiles reads, decodes and validates endpoint files (see the package
// documentation for their layout). Each file may hold at most MaxFileSize
// bytes. It reports every broken file and definition at once, as a joined
// error of *DecodeError and *ValidationError values. Cross-file checks
// (duplicates, references) need the region and account of ARNs and happen
// in Plans.
func LoadFiles(paths ...string) (*Bundle, error) {
	if len(paths) == 0 {
		return nil, errors.New("spec: no endpoint files given")
	}
	b := &Bundle{}
	var errs []error
	for _, p := range paths {
		if err := b.load(p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Bundle) load(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("spec: %s: %w", path, err)
	}
	data, err := readCapped(path)
	if err != nil {
		return err
	}
	f, err := Parse(path, data)
	if err != nil {
		return err
	}
	dir := filepath.Dir(abs)
	var errs []error
	for i, m := range f.Models {
		src := Source{File: path, Dir: dir, Path: "Models[" + strconv.Itoa(i) + "]"}
		errs = append(errs, located(m.Validate(), src))
		b.Models = append(b.Models, Model{m, src})
	}
	for i, c := range f.EndpointConfigs {
		src := Source{File: path, Dir: dir, Path: "EndpointConfigs[" + strconv.Itoa(i) + "]"}
		errs = append(errs, located(c.Validate(), src))
		b.EndpointConfigs = append(b.EndpointConfigs, EndpointConfig{c, src})
	}
	for i, e := range f.Endpoints {
		src := Source{File: path, Dir: dir, Path: "Endpoints[" + strconv.Itoa(i) + "]"}
		errs = append(errs, located(e.Validate(), src))
		b.Endpoints = append(b.Endpoints, Endpoint{e, src})
	}
	for i, c := range f.InferenceComponents {
		src := Source{File: path, Dir: dir, Path: "InferenceComponents[" + strconv.Itoa(i) + "]"}
		errs = append(errs, located(c.Validate(), src))
		b.InferenceComponents = append(b.InferenceComponents, InferenceComponent{c, src})
	}
	return errors.Join(errs...)
}

func readCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("spec: reading %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, &DecodeError{File: path, Err: ErrTooLarge}
	}
	return data, nil
}

// located stamps a validation or lookup error with its source, unless it
// already names one.
func located(err error, src Source) error {
	var ve *ValidationError
	var nf *NotFoundError
	switch {
	case errors.As(err, &ve) && ve.File == "":
		ve.File, ve.Path = src.File, src.Path
	case errors.As(err, &nf) && nf.File == "":
		nf.File, nf.Path = src.File, src.Path
	}
	return err
}

// Plans resolves every endpoint of the bundle into what the runtime needs,
// in file order. It validates every definition, refuses names defined twice
// (*AlreadyExistsError) and references to missing definitions
// (*NotFoundError), with ARNs built from region and account, and reports all
// such problems at once as a joined error. Warnings name what is accepted
// but ignored locally and definitions no endpoint uses.
func (b *Bundle) Plans(region, account string) ([]containers.EndpointPlan, []string, error) {
	var errs []error
	var warns []string
	models := map[string]*Model{}
	for i := range b.Models {
		m := &b.Models[i]
		if err := m.Validate(); err != nil {
			errs = append(errs, located(err, m.Source))
			continue
		}
		if dup := existing(models, KindModel, m.ModelName, m.Source, region, account); dup != nil {
			errs = append(errs, dup)
			continue
		}
		models[strings.ToLower(m.ModelName)] = m
		warns = append(warns, sourced(m.File, m.Warnings())...)
	}
	configs := map[string]*EndpointConfig{}
	for i := range b.EndpointConfigs {
		c := &b.EndpointConfigs[i]
		if err := c.Validate(); err != nil {
			errs = append(errs, located(err, c.Source))
			continue
		}
		if dup := existing(configs, KindEndpointConfig, c.EndpointConfigName, c.Source, region, account); dup != nil {
			errs = append(errs, dup)
			continue
		}
		configs[strings.ToLower(c.EndpointConfigName)] = c
		warns = append(warns, sourced(c.File, c.Warnings())...)
	}
	endpoints := map[string]*Endpoint{}
	usedModels, usedConfigs := map[string]bool{}, map[string]bool{}
	var plans []containers.EndpointPlan
	seenWarn := map[string]bool{}
	for i := range b.Endpoints {
		e := &b.Endpoints[i]
		if err := e.Validate(); err != nil {
			errs = append(errs, located(err, e.Source))
			continue
		}
		if dup := existing(endpoints, KindEndpoint, e.EndpointName, e.Source, region, account); dup != nil {
			errs = append(errs, dup)
			continue
		}
		endpoints[strings.ToLower(e.EndpointName)] = e
		warns = append(warns, sourced(e.File, e.Warnings())...)

		c, ok := configs[strings.ToLower(e.EndpointConfigName)]
		if !ok {
			if !failedConfig(b.EndpointConfigs, e.EndpointConfigName) {
				errs = append(errs, &NotFoundError{Kind: KindEndpointConfig, Name: e.EndpointConfigName,
					ARN: ARN(region, account, KindEndpointConfig, e.EndpointConfigName), File: e.File, Path: e.Path})
			}
			continue
		}
		usedConfigs[strings.ToLower(c.EndpointConfigName)] = true
		lookup := func(name string) (CreateModelInput, string, error) {
			m, ok := models[strings.ToLower(name)]
			if !ok {
				return CreateModelInput{}, "", &NotFoundError{Kind: KindModel, Name: name,
					ARN: ARN(region, account, KindModel, name), File: c.File, Path: c.Path}
			}
			usedModels[strings.ToLower(name)] = true
			return m.CreateModelInput, m.Dir, nil
		}
		plan, pw, err := buildPlan(e.CreateEndpointInput, c.CreateEndpointConfigInput, lookup)
		if err != nil {
			var nf *NotFoundError
			if errors.As(err, &nf) && failedModel(b.Models, nf.Name) {
				continue // its own error is already reported
			}
			errs = append(errs, located(err, e.Source))
			continue
		}
		for _, w := range sourced(c.File, pw) {
			if !seenWarn[w] {
				seenWarn[w] = true
				warns = append(warns, w)
			}
		}
		plans = append(plans, plan)
	}
	errs = append(errs, b.checkComponents(endpoints, configs, region, account)...)
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	for _, m := range b.Models {
		if !usedModels[strings.ToLower(m.ModelName)] {
			warns = append(warns, m.File+": model "+strconv.Quote(m.ModelName)+" is not used by any endpoint")
		}
	}
	for _, c := range b.EndpointConfigs {
		if !usedConfigs[strings.ToLower(c.EndpointConfigName)] {
			warns = append(warns, c.File+": endpoint configuration "+strconv.Quote(c.EndpointConfigName)+" is not used by any endpoint")
		}
	}
	return plans, warns, nil
}

// checkComponents validates the files' inference components, refuses names
// defined twice, and refuses a component on an endpoint of the files whose
// configuration names models, or on a variant that endpoint lacks. An
// endpoint not in the files may exist already: Apply reports it if not.
func (b *Bundle) checkComponents(endpoints map[string]*Endpoint, configs map[string]*EndpointConfig, region, account string) []error {
	var errs []error
	seen := map[string]*InferenceComponent{}
	for i := range b.InferenceComponents {
		ic := &b.InferenceComponents[i]
		if err := ic.Validate(); err != nil {
			errs = append(errs, located(err, ic.Source))
			continue
		}
		if dup := existing(seen, KindInferenceComponent, ic.InferenceComponentName, ic.Source, region, account); dup != nil {
			errs = append(errs, dup)
			continue
		}
		seen[strings.ToLower(ic.InferenceComponentName)] = ic
		e, ok := endpoints[strings.ToLower(ic.EndpointName)]
		if !ok {
			continue
		}
		c, ok := configs[strings.ToLower(e.EndpointConfigName)]
		if !ok {
			continue // the endpoint's own error is reported
		}
		found := ic.Specification.IsAdapter() && ic.VariantName == "" // an adapter is placed on its base's variant
		for _, v := range c.ProductionVariants {
			if !v.ComponentVariant() {
				errs = append(errs, &ValidationError{File: ic.File, Path: ic.Path, Messages: []string{"Inference Components are not supported in endpoint " +
					strconv.Quote(ic.EndpointName) + ": the production variants of its endpoint configuration " + strconv.Quote(c.EndpointConfigName) + " name a ModelName."}})
				found = true
				break
			}
			if v.VariantName == ic.VariantName {
				found = true
			}
		}
		if !found {
			errs = append(errs, &ValidationError{File: ic.File, Path: ic.Path, Messages: []string{"The variant name " + ic.VariantName +
				" is not present in endpoint " + strconv.Quote(ic.EndpointName) + " (endpoint configuration " + strconv.Quote(c.EndpointConfigName) + ")."}})
		}
	}
	return errs
}

// existing reports a second definition of name, or nil.
func existing[T interface{ source() Source }](seen map[string]T, kind Kind, name string, src Source, region, account string) error {
	first, ok := seen[strings.ToLower(name)]
	if !ok {
		return nil
	}
	return &AlreadyExistsError{Kind: kind, Name: name, ARN: ARN(region, account, kind, name),
		File: src.File, Path: src.Path, Previous: first.source().File}
}

func (s Source) source() Source { return s }

// failedConfig reports whether an endpoint configuration of that name
// exists but failed validation, so that no second error is reported for it.
func failedConfig(cs []EndpointConfig, name string) bool {
	for _, c := range cs {
		if strings.EqualFold(c.EndpointConfigName, name) {
			return true
		}
	}
	return false
}

func failedModel(ms []Model, name string) bool {
	for _, m := range ms {
		if strings.EqualFold(m.ModelName, name) {
			return true
		}
	}
	return false
}

func sourced(file string, ws []string) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = file + ": " + w
	}
	return out
}
