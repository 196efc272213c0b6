package host

import (
	"context"
	"time"

	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/listing"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
)

// CreateModel stores a model; baseDir is where relative file:// URLs resolve.
// Nothing is stored once ctx is done.
func (s *Server) CreateModel(ctx context.Context, in spec.CreateModelInput, baseDir string) (string, error) {
	if err := in.Validate(); err != nil {
		return "", err
	}
	if err := s.checkModelData(in, baseDir); err != nil {
		return "", err
	}
	rec := ModelRecord{Input: in, BaseDir: baseDir, ARN: s.arn(spec.KindModel, in.ModelName), Created: time.Now(), Tags: tagList(in.Tags)}
	if err := apierr.Ended(ctx, rec.ARN); err != nil {
		return "", err
	}
	ok, err := s.store.Create(store.Models, in.ModelName, rec)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", &spec.AlreadyExistsError{Kind: spec.KindModel, Name: in.ModelName, ARN: rec.ARN}
	}
	return rec.ARN, nil
}

// checkModelData refuses model data the host will not serve (file:// paths
// outside the model roots) as a ValidationException.
func (s *Server) checkModelData(in spec.CreateModelInput, baseDir string) error {
	if s.cfg.ModelData == nil {
		return nil
	}
	defs := in.Containers
	if in.PrimaryContainer != nil {
		defs = append([]spec.ContainerDefinition{*in.PrimaryContainer}, defs...)
	}
	for _, d := range defs {
		if err := s.cfg.ModelData.CheckModelDataURL(d.ModelData(), baseDir); err != nil {
			return apierr.ValidationException("%s", err.Error())
		}
		for _, ch := range d.AdditionalModelData() { // each channel where model data may come from
			if err := s.cfg.ModelData.CheckModelDataURL(ch.URL, baseDir); err != nil {
				return apierr.ValidationException("AdditionalModelDataSources channel %q: %s", ch.Channel, err.Error())
			}
		}
	}
	return nil
}

func (s *Server) opCreateModel(ctx context.Context, in *spec.CreateModelInput) (any, error) {
	arn, err := s.CreateModel(ctx, *in, s.cfg.BaseDir)
	if err != nil {
		return nil, err
	}
	return map[string]string{"ModelArn": arn}, nil
}

type describeModelOutput struct {
	spec.CreateModelInput
	ModelArn     string     `json:"ModelArn"`
	CreationTime spec.Epoch `json:"CreationTime"`
}

func (s *Server) getModel(name string) (ModelRecord, error) {
	return getRecord[ModelRecord](s, store.Models, spec.KindModel, name)
}

func (s *Server) opDescribeModel(_ context.Context, in *modelNameInput) (any, error) {
	if err := requireName("modelName", in.ModelName); err != nil {
		return nil, err
	}
	rec, err := s.getModel(in.ModelName)
	if err != nil {
		return nil, err
	}
	out := describeModelOutput{CreateModelInput: rec.Input, ModelArn: rec.ARN, CreationTime: spec.Epoch(rec.Created)}
	out.Tags = nil // Tags are not part of DescribeModel's output
	return out, nil
}

func (s *Server) opDeleteModel(_ context.Context, in *modelNameInput) (any, error) {
	if err := requireName("modelName", in.ModelName); err != nil {
		return nil, err
	}
	return s.deleteRecord(store.Models, spec.KindModel, in.ModelName)
}

func (s *Server) opListModels(_ context.Context, in *listing.Input) (any, error) {
	return listing.Operation(in, "Models", []string{"Name", "CreationTime"}, func() ([]listing.Item, error) {
		var items []listing.Item
		err := store.List(s.store, store.Models, func(r ModelRecord) error {
			items = append(items, listing.Item{Name: r.Input.ModelName, Created: r.Created, Modified: r.Created,
				Out: map[string]any{"ModelName": r.Input.ModelName, "ModelArn": r.ARN, "CreationTime": spec.Epoch(r.Created)}})
			return nil
		})
		return items, err
	})
}
