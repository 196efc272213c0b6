package mme

import "time"

// Observer receives SageMaker's multi-model metrics
// (https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoint-cloudwatch-metrics.html), to be published in microseconds
// with dimensions EndpointName and VariantName. Methods must be cheap, safe
// for concurrent use and must not call back into the Cache or Manager:
// LoadedModelCount is called with the Manager's lock held so that values
// arrive in order.
type Observer interface {
	// ModelLoadingWaitTime: how long a request that missed the cache waited
	// for the download and load (whatever the outcome).
	ModelLoadingWaitTime(d time.Duration)
	// ModelDownloadingTime: one download and extraction (reported by the Cache).
	ModelDownloadingTime(d time.Duration)
	// ModelLoadingTime: one successful load call to the container.
	ModelLoadingTime(d time.Duration)
	// ModelUnloadingTime: one unload call to the container.
	ModelUnloadingTime(d time.Duration)
	// ModelEvicted: a model is being unloaded to free memory for another
	// (a load or a call answered 507), as opposed to an idle or
	// CacheDisabled unload. Called with the Manager's lock held.
	ModelEvicted()
	// ModelCacheHit: once per Acquire; true when the model was already loaded.
	ModelCacheHit(hit bool)
	// LoadedModelCount: the models loaded in the container, after each change.
	LoadedModelCount(n int)
}

// NopObserver discards every metric.
type NopObserver struct{}

func (NopObserver) ModelLoadingWaitTime(time.Duration) {}
func (NopObserver) ModelDownloadingTime(time.Duration) {}
func (NopObserver) ModelLoadingTime(time.Duration)     {}
func (NopObserver) ModelUnloadingTime(time.Duration)   {}
func (NopObserver) ModelEvicted()                      {}
func (NopObserver) ModelCacheHit(bool)                 {}
func (NopObserver) LoadedModelCount(int)               {}

var _ Observer = NopObserver{}

// roundDuration prints a duration with its unit at a precision fit for a
// log line (as the containers package does): whole seconds from 10 s,
// tenths below, milliseconds below 1 s.
func roundDuration(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// Tee is an Observer that tells each of its observers, in order.
type Tee []Observer

func (t Tee) ModelLoadingWaitTime(d time.Duration) {
	for _, o := range t {
		o.ModelLoadingWaitTime(d)
	}
}

func (t Tee) ModelDownloadingTime(d time.Duration) {
	for _, o := range t {
		o.ModelDownloadingTime(d)
	}
}

func (t Tee) ModelLoadingTime(d time.Duration) {
	for _, o := range t {
		o.ModelLoadingTime(d)
	}
}

func (t Tee) ModelUnloadingTime(d time.Duration) {
	for _, o := range t {
		o.ModelUnloadingTime(d)
	}
}

func (t Tee) ModelEvicted() {
	for _, o := range t {
		o.ModelEvicted()
	}
}

func (t Tee) ModelCacheHit(hit bool) {
	for _, o := range t {
		o.ModelCacheHit(hit)
	}
}

func (t Tee) LoadedModelCount(n int) {
	for _, o := range t {
		o.LoadedModelCount(n)
	}
}

var _ Observer = Tee(nil)
