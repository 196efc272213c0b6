package host

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
)

// AddTags, ListTags and DeleteTags (SageMaker's tag operations) on models,
// endpoint configurations and endpoints. Tags live in the resource's own
// durable record, so they go when the resource goes; mce gives them no
// meaning. The resource authorized is the ResourceArn itself, in the
// canonical (lower-cased) form the operation then acts on.

type (
	addTagsInput struct {
		ResourceArn string
		Tags        []spec.Tag
	}
	listTagsInput struct {
		ResourceArn string
		MaxResults  *int
		NextToken   string
	}
	deleteTagsInput struct {
		ResourceArn string
		TagKeys     []string
	}
)

const maxResourceARNLen = 256

// taggableKinds are the resources mce tags, and whose ARNs it reads.
var taggableKinds = []spec.Kind{spec.KindModel, spec.KindEndpointConfig, spec.KindEndpoint, spec.KindInferenceComponent}

// requestKeysOf is the condition keys of a decoded control-plane input:
// the tags of CreateModel, CreateEndpointConfig, CreateEndpoint and AddTags
// (aws:RequestTag/<key>, aws:TagKeys) and DeleteTags' TagKeys (aws:TagKeys).
func requestKeysOf(in any) requestKeys {
	switch v := in.(type) {
	case *spec.CreateModelInput:
		return tagKeys(v.Tags)
	case *spec.CreateEndpointConfigInput:
		return tagKeys(v.Tags)
	case *spec.CreateEndpointInput:
		return tagKeys(v.Tags)
	case *addTagsInput:
		return tagKeys(v.Tags)
	case *spec.CreateInferenceComponentInput:
		return tagKeys(v.Tags)
	case *deleteTagsInput:
		if len(v.TagKeys) > 0 {
			return requestKeys{multi: map[string][]string{authz.KeyTagKeys: v.TagKeys}}
		}
	}
	return requestKeys{}
}

// parseResourceARN reads an ARN of a model, endpoint configuration or
// endpoint of this host's region and account. ok is false for anything else.
func (s *Server) parseResourceARN(arn string) (kind spec.Kind, name string, ok bool) {
	if arn == "" || len(arn) > maxResourceARNLen {
		return "", "", false
	}
	typ, name, found := strings.Cut(arn, "/")
	if !found || name == "" || len(name) > 63 || !namePattern.MatchString(name) {
		return "", "", false
	}
	prefix := strings.TrimSuffix(spec.ARN(s.cfg.Region, s.cfg.Account, spec.KindModel, "x"), "model/x")
	t, found := strings.CutPrefix(typ, prefix)
	if !found {
		return "", "", false
	}
	if kind = spec.Kind(t); slices.Contains(taggableKinds, kind) {
		return kind, strings.ToLower(name), true
	}
	return "", "", false
}

// tagResource is the resource a tag operation is authorized on: the
// canonical ARN when arn names one of mce's resources, else arn as given
// (the operation then refuses it without acting).
func (s *Server) tagResource(arn string) string {
	if kind, name, ok := s.parseResourceARN(arn); ok {
		return s.arn(kind, name)
	}
	return arn
}

// checkResourceARN validates ResourceArn as SageMaker does.
func (s *Server) checkResourceARN(arn string) (spec.Kind, string, error) {
	if arn == "" {
		return "", "", apierr.ValidationException("1 validation error detected: Value null at 'resourceArn' failed to satisfy constraint: Member must not be null")
	}
	if len(arn) > maxResourceARNLen {
		return "", "", apierr.ValidationException("1 validation error detected: Value '%s' at 'resourceArn' failed to satisfy constraint: Member must have length less than or equal to %d", arn, maxResourceARNLen)
	}
	kind, name, ok := s.parseResourceARN(arn)
	if !ok {
		return "", "", apierr.ValidationException("Resource %q is not a model, endpoint configuration or endpoint of this host (region %s, account %s): not found.", arn, s.cfg.Region, s.cfg.Account)
	}
	return kind, name, nil
}

func resourceNotFound(arn string) error {
	return apierr.ValidationException("Resource %s not found.", arn)
}

// tagList is tags as stored: never nil, so that "no tags" differs from a
// record written before mce kept tags.
func tagList(tags []spec.Tag) []spec.Tag {
	if tags == nil {
		return []spec.Tag{}
	}
	return slices.Clone(tags)
}

// tagsOf reads a resource's tags.
func (s *Server) tagsOf(kind spec.Kind, name string) ([]spec.Tag, bool, error) {
	switch kind {
	case spec.KindModel:
		rec, err := s.getModel(name)
		if err != nil {
			return nil, false, ignoreNotFound(err)
		}
		return storedTags(rec.Tags, rec.Input.Tags), true, nil
	case spec.KindEndpointConfig:
		rec, err := s.getConfig(name)
		if err != nil {
			return nil, false, ignoreNotFound(err)
		}
		return storedTags(rec.Tags, rec.Input.Tags), true, nil
	case spec.KindInferenceComponent:
		c := s.ics.Get(name)
		if c == nil {
			return nil, false, nil
		}
		return tagList(c.Record().Tags), true, nil
	}
	e := s.reg.get(name)
	if e == nil {
		return nil, false, nil
	}
	return tagList(e.record().Tags), true, nil
}

func storedTags(tags, created []spec.Tag) []spec.Tag {
	if tags == nil {
		return tagList(created)
	}
	return tags
}

func ignoreNotFound(err error) error {
	if _, ok := err.(*spec.NotFoundError); ok {
		return nil
	}
	return err
}

// changeTags applies change to a resource's tags durably; found is false when
// the resource does not exist (then nothing is written).
func (s *Server) changeTags(kind spec.Kind, name string, change func([]spec.Tag) ([]spec.Tag, error)) (bool, error) {
	switch kind {
	case spec.KindModel:
		return updateRecord(s, store.Models, name, func(r *ModelRecord) error {
			t, err := change(storedTags(r.Tags, r.Input.Tags))
			r.Tags = tagList(t)
			return err
		})
	case spec.KindEndpointConfig:
		return updateRecord(s, store.EndpointConfigs, name, func(r *ConfigRecord) error {
			t, err := change(storedTags(r.Tags, r.Input.Tags))
			r.Tags = tagList(t)
			return err
		})
	case spec.KindInferenceComponent:
		return s.ics.ChangeTags(name, func(t []spec.Tag) ([]spec.Tag, error) { return change(tagList(t)) })
	}
	e := s.reg.get(name)
	if e == nil {
		return false, nil
	}
	// Under e.mu, as every write of the endpoint's record: the stored record
	// is e.rec, and Update never brings back a record deleteEndpoint removed.
	e.mu.Lock()
	defer e.mu.Unlock()
	t, err := change(tagList(e.rec.Tags))
	if err != nil {
		return true, err
	}
	rec := e.rec
	rec.Tags = t
	found, err := s.store.Update(store.Endpoints, name, func([]byte) ([]byte, error) { return json.Marshal(rec) })
	if err == nil && found {
		e.rec.Tags = t
	}
	return found, err
}

// updateRecord changes one stored record in place, in one transaction.
func updateRecord[T any](s *Server, bucket, name string, change func(*T) error) (bool, error) {
	return s.store.Update(bucket, name, func(b []byte) ([]byte, error) {
		var rec T
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, err
		}
		if err := change(&rec); err != nil {
			return nil, err
		}
		return json.Marshal(rec)
	})
}

func (s *Server) opAddTags(_ context.Context, in *addTagsInput) (any, error) {
	kind, name, err := s.checkResourceARN(in.ResourceArn)
	if err != nil {
		return nil, err
	}
	if in.Tags == nil {
		return nil, apierr.ValidationException("1 validation error detected: Value null at 'tags' failed to satisfy constraint: Member must not be null")
	}
	if err := spec.CheckTags("tags", in.Tags); err != nil {
		return nil, err
	}
	arn := s.arn(kind, name)
	found, err := s.changeTags(kind, name, func(tags []spec.Tag) ([]spec.Tag, error) {
		for _, t := range in.Tags {
			i := slices.IndexFunc(tags, func(o spec.Tag) bool { return o.Key == t.Key })
			if i >= 0 {
				tags[i].Value = t.Value
			} else {
				tags = append(tags, t)
			}
		}
		if len(tags) > spec.MaxTags {
			return nil, apierr.ValidationException("Resource %s would have %d tags; a resource can have at most %d.", arn, len(tags), spec.MaxTags)
		}
		return tags, nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, resourceNotFound(arn)
	}
	return map[string]any{"Tags": tagList(in.Tags)}, nil
}

func (s *Server) opListTags(_ context.Context, in *listTagsInput) (any, error) {
	kind, name, err := s.checkResourceARN(in.ResourceArn)
	if err != nil {
		return nil, err
	}
	max := 50
	if in.MaxResults != nil {
		if *in.MaxResults < 50 || *in.MaxResults > 100 {
			return nil, apierr.ValidationException("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value between 50 and 100", *in.MaxResults)
		}
		max = *in.MaxResults
	}
	tags, found, err := s.tagsOf(kind, name)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, resourceNotFound(s.arn(kind, name))
	}
	start := 0
	if in.NextToken != "" {
		raw, err := base64.RawURLEncoding.DecodeString(in.NextToken)
		n, err2 := strconv.Atoi(string(raw))
		if err != nil || err2 != nil || n < 0 || n > len(tags) {
			return nil, apierr.ValidationException("The NextToken is not valid.")
		}
		start = n
	}
	end := min(start+max, len(tags))
	out := map[string]any{"Tags": tagList(tags[start:end])}
	if end < len(tags) {
		out["NextToken"] = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end)))
	}
	return out, nil
}

func (s *Server) opDeleteTags(_ context.Context, in *deleteTagsInput) (any, error) {
	kind, name, err := s.checkResourceARN(in.ResourceArn)
	if err != nil {
		return nil, err
	}
	if in.TagKeys == nil {
		return nil, apierr.ValidationException("1 validation error detected: Value null at 'tagKeys' failed to satisfy constraint: Member must not be null")
	}
	if err := spec.CheckTagKeys("tagKeys", in.TagKeys); err != nil {
		return nil, err
	}
	found, err := s.changeTags(kind, name, func(tags []spec.Tag) ([]spec.Tag, error) {
		return slices.DeleteFunc(tags, func(t spec.Tag) bool { return slices.Contains(in.TagKeys, t.Key) }), nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, resourceNotFound(s.arn(kind, name))
	}
	return struct{}{}, nil
}
