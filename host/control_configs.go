package host

import (
	"context"
	"time"

	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/listing"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
)

// CreateEndpointConfig stores an endpoint configuration; its models must
// exist. Nothing is stored once ctx is done.
func (s *Server) CreateEndpointConfig(ctx context.Context, in spec.CreateEndpointConfigInput) (string, error) {
	if err := in.Validate(); err != nil {
		return "", err
	}
	if err := s.captures.check(in.DataCaptureConfig); err != nil {
		return "", err
	}
	for _, v := range in.AllVariants() {
		if v.ComponentVariant() {
			continue // hosts inference components
		}
		m, err := s.getModel(v.ModelName)
		if err != nil {
			return "", err
		}
		if in.HasShadows() {
			if err := spec.CheckShadowModel(v.VariantName, m.Input); err != nil {
				return "", err
			}
		}
	}
	rec := ConfigRecord{Input: in, ARN: s.arn(spec.KindEndpointConfig, in.EndpointConfigName), Created: time.Now(), Tags: tagList(in.Tags)}
	if err := apierr.Ended(ctx, rec.ARN); err != nil {
		return "", err
	}
	ok, err := s.store.Create(store.EndpointConfigs, in.EndpointConfigName, rec)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", &spec.AlreadyExistsError{Kind: spec.KindEndpointConfig, Name: in.EndpointConfigName, ARN: rec.ARN}
	}
	return rec.ARN, nil
}

func (s *Server) opCreateEndpointConfig(ctx context.Context, in *spec.CreateEndpointConfigInput) (any, error) {
	arn, err := s.CreateEndpointConfig(ctx, *in)
	if err != nil {
		return nil, err
	}
	return map[string]string{"EndpointConfigArn": arn}, nil
}

func (s *Server) getConfig(name string) (ConfigRecord, error) {
	return getRecord[ConfigRecord](s, store.EndpointConfigs, spec.KindEndpointConfig, name)
}

func (s *Server) opDescribeEndpointConfig(_ context.Context, in *configNameInput) (any, error) {
	if err := requireName("endpointConfigName", in.EndpointConfigName); err != nil {
		return nil, err
	}
	rec, err := s.getConfig(in.EndpointConfigName)
	if err != nil {
		return nil, err
	}
	out := struct {
		spec.CreateEndpointConfigInput
		EndpointConfigArn string     `json:"EndpointConfigArn"`
		CreationTime      spec.Epoch `json:"CreationTime"`
	}{rec.Input, rec.ARN, spec.Epoch(rec.Created)}
	out.Tags = nil
	return out, nil
}

func (s *Server) opDeleteEndpointConfig(_ context.Context, in *configNameInput) (any, error) {
	if err := requireName("endpointConfigName", in.EndpointConfigName); err != nil {
		return nil, err
	}
	return s.deleteRecord(store.EndpointConfigs, spec.KindEndpointConfig, in.EndpointConfigName)
}

func (s *Server) opListEndpointConfigs(_ context.Context, in *listing.Input) (any, error) {
	return listing.Operation(in, "EndpointConfigs", []string{"Name", "CreationTime"}, func() ([]listing.Item, error) {
		var items []listing.Item
		err := store.List(s.store, store.EndpointConfigs, func(r ConfigRecord) error {
			items = append(items, listing.Item{Name: r.Input.EndpointConfigName, Created: r.Created, Modified: r.Created,
				Out: map[string]any{"EndpointConfigName": r.Input.EndpointConfigName, "EndpointConfigArn": r.ARN, "CreationTime": spec.Epoch(r.Created)}})
			return nil
		})
		return items, err
	})
}
