// Package listing is the filtering, sorting and NextToken paging that
// every SageMaker List* operation shares (NameContains, the time filters,
// StatusEquals, SortBy, SortOrder, MaxResults, NextToken), with
// SageMaker's validation messages. It owns no state: the operations hand
// it their items.
package listing

import (
	"encoding/base64"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
)

// Input is the common part of the List* operations.
type Input struct {
	SortBy                 string
	SortOrder              string
	NextToken              string
	MaxResults             *int
	NameContains           string
	CreationTimeBefore     *spec.Epoch
	CreationTimeAfter      *spec.Epoch
	LastModifiedTimeBefore *spec.Epoch
	LastModifiedTimeAfter  *spec.Epoch
	StatusEquals           string
}

// Item is one resource as the List* operations filter, sort and show
// it: Out is its summary in the answer.
type Item struct {
	Name     string
	Created  time.Time
	Modified time.Time
	Status   string
	Out      any
}

// page filters, sorts and pages items as the List* operations do.
func (in Input) Page(items []Item, sortKeys ...string) ([]any, string, error) {
	if in.SortBy == "" {
		in.SortBy = "CreationTime"
	}
	if !contains(sortKeys, in.SortBy) {
		return nil, "", apierr.ValidationException("1 validation error detected: Value '%s' at 'sortBy' failed to satisfy constraint: Member must satisfy enum value set: [%s]", in.SortBy, strings.Join(sortKeys, ", "))
	}
	if in.SortOrder == "" {
		in.SortOrder = "Descending"
	}
	if in.SortOrder != "Ascending" && in.SortOrder != "Descending" {
		return nil, "", apierr.ValidationException("1 validation error detected: Value '%s' at 'sortOrder' failed to satisfy constraint: Member must satisfy enum value set: [Ascending, Descending]", in.SortOrder)
	}
	max := 10
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 100 {
			return nil, "", apierr.ValidationException("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 100", *in.MaxResults)
		}
		max = *in.MaxResults
	}
	var kept []Item
	for _, it := range items {
		switch {
		case in.NameContains != "" && !strings.Contains(strings.ToLower(it.Name), strings.ToLower(in.NameContains)):
		case in.CreationTimeBefore != nil && !it.Created.Before(time.Time(*in.CreationTimeBefore)):
		case in.CreationTimeAfter != nil && !it.Created.After(time.Time(*in.CreationTimeAfter)):
		case in.LastModifiedTimeBefore != nil && !it.Modified.Before(time.Time(*in.LastModifiedTimeBefore)):
		case in.LastModifiedTimeAfter != nil && !it.Modified.After(time.Time(*in.LastModifiedTimeAfter)):
		case in.StatusEquals != "" && it.Status != in.StatusEquals:
		default:
			kept = append(kept, it)
		}
	}
	before := func(a, b Item) bool { // ascending order; names break ties
		switch in.SortBy {
		case "Name":
			return a.Name < b.Name
		case "Status":
			return a.Status < b.Status || (a.Status == b.Status && a.Name < b.Name)
		}
		return a.Created.Before(b.Created) || (a.Created.Equal(b.Created) && a.Name < b.Name)
	}
	sort.SliceStable(kept, func(i, j int) bool {
		if in.SortOrder == "Descending" {
			return before(kept[j], kept[i])
		}
		return before(kept[i], kept[j])
	})
	start := 0
	if in.NextToken != "" {
		raw, err := base64.RawURLEncoding.DecodeString(in.NextToken)
		n, err2 := strconv.Atoi(string(raw))
		if err != nil || err2 != nil || n < 0 || n > len(kept) {
			return nil, "", apierr.ValidationException("The NextToken is not valid.")
		}
		start = n
	}
	end := min(start+max, len(kept))
	out := make([]any, 0, end-start)
	for _, it := range kept[start:end] {
		out = append(out, it.Out)
	}
	next := ""
	if end < len(kept) {
		next = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end)))
	}
	return out, next, nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// Operation is the shape of the List operations: collect every item,
// then filter, sort and page them as in says, under key (with NextToken when
// more remain).
func Operation(in *Input, key string, sortKeys []string, collect func() ([]Item, error)) (any, error) {
	items, err := collect()
	if err != nil {
		return nil, err
	}
	page, next, err := in.Page(items, sortKeys...)
	if err != nil {
		return nil, err
	}
	out := map[string]any{key: page}
	if next != "" {
		out["NextToken"] = next
	}
	return out, nil
}
