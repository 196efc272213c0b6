package async

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Asynchronous inference metrics, Prometheus-style names for SageMaker's
// CloudWatch metrics of asynchronous endpoints (AWS/SageMaker namespace,
// EndpointName dimension):
//
//	mce_async_backlog_size                 ApproximateBacklogSize
//	mce_async_backlog_size_per_instance    ApproximateBacklogSizePerInstance
//	mce_async_oldest_request_age_seconds   ApproximateAgeOfOldestRequest
//	mce_async_has_backlog_without_capacity HasBacklogWithoutCapacity
//
// The backlog counts requests queued or in flight, as SageMaker's does. The
// gauges are read from the queues at scrape time, so a deleted endpoint's
// series go with its queue. No async series exists until an endpoint has
// had an asynchronous request.
type queueMetrics struct {
	accepted    *prometheus.CounterVec
	completed   *prometheus.CounterVec
	writeErrors *prometheus.CounterVec
}

var (
	descBacklog = prometheus.NewDesc("mce_async_backlog_size",
		"Asynchronous requests queued or in flight (CloudWatch ApproximateBacklogSize).", []string{"endpoint"}, nil)
	descBacklogPerInstance = prometheus.NewDesc("mce_async_backlog_size_per_instance",
		"Asynchronous backlog divided by the endpoint's running instances; the whole backlog when none runs (CloudWatch ApproximateBacklogSizePerInstance).", []string{"endpoint"}, nil)
	descOldest = prometheus.NewDesc("mce_async_oldest_request_age_seconds",
		"Age of the oldest asynchronous request queued or in flight, 0 when none (CloudWatch ApproximateAgeOfOldestRequest).", []string{"endpoint"}, nil)
	descNoCapacity = prometheus.NewDesc("mce_async_has_backlog_without_capacity",
		"1 when the endpoint has a backlog and no running instance to serve it, else 0 (CloudWatch HasBacklogWithoutCapacity).", []string{"endpoint"}, nil)
)

func newQueueMetrics(reg prometheus.Registerer, q *Queue) *queueMetrics {
	m := &queueMetrics{
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mce_async_requests_accepted_total",
			Help: "InvokeEndpointAsync requests accepted (persisted and answered 202)."}, []string{"endpoint"}),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mce_async_requests_completed_total",
			Help: "Asynchronous requests settled, by outcome: answered (OutputLocation), failed (FailureLocation), or dropped (its location outside --async-output-prefix after a restart)."}, []string{"endpoint", "outcome"}),
		writeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mce_async_result_write_errors_total",
			Help: "Failed writes of asynchronous results to S3; the request stays queued and is tried again."}, []string{"endpoint"}),
	}
	if reg != nil {
		reg.MustRegister(m.accepted, m.completed, m.writeErrors, collector{q})
	}
	return m
}

// forget drops the series of a deleted endpoint.
func (m *queueMetrics) forget(endpoint string) {
	m.accepted.DeleteLabelValues(endpoint)
	m.completed.DeletePartialMatch(prometheus.Labels{"endpoint": endpoint})
	m.writeErrors.DeleteLabelValues(endpoint)
}

// collector reads the queues at scrape time.
type collector struct{ q *Queue }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descBacklog
	ch <- descBacklogPerInstance
	ch <- descOldest
	ch <- descNoCapacity
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.q.stats(time.Now()) {
		perInstance := float64(st.backlog)
		if st.instances > 0 {
			perInstance /= float64(st.instances)
		}
		noCapacity := 0.0
		if st.backlog > 0 && st.instances == 0 {
			noCapacity = 1
		}
		ch <- prometheus.MustNewConstMetric(descBacklog, prometheus.GaugeValue, float64(st.backlog), st.endpoint)
		ch <- prometheus.MustNewConstMetric(descBacklogPerInstance, prometheus.GaugeValue, perInstance, st.endpoint)
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, st.oldest.Seconds(), st.endpoint)
		ch <- prometheus.MustNewConstMetric(descNoCapacity, prometheus.GaugeValue, noCapacity, st.endpoint)
	}
}

// queueStat is one endpoint's queue, as the metrics show it.
type queueStat struct {
	endpoint  string
	backlog   int
	instances int
	oldest    time.Duration
}

// Backlog is one asynchronous endpoint's queue: the requests queued or
// running, the instances that serve them, and the age of the oldest.
type Backlog struct {
	Endpoint  string
	Size      int
	Instances int
	Oldest    time.Duration
}

// Backlogs reads every endpoint's queue (SageMaker's
// ApproximateBacklogSize and the metrics beside it).
func (q *Queue) Backlogs() []Backlog {
	sts := q.stats(time.Now())
	out := make([]Backlog, len(sts))
	for i, st := range sts {
		out[i] = Backlog{Endpoint: st.endpoint, Size: st.backlog, Instances: st.instances, Oldest: st.oldest}
	}
	return out
}

func (q *Queue) stats(now time.Time) []queueStat {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []queueStat
	for _, eq := range q.queues {
		st := queueStat{endpoint: eq.name, backlog: len(eq.pending) + len(eq.running), instances: eq.instances}
		var first time.Time
		for _, it := range eq.pending {
			if first.IsZero() || it.rec.Accepted.Before(first) {
				first = it.rec.Accepted
			}
		}
		for _, it := range eq.running {
			if first.IsZero() || it.rec.Accepted.Before(first) {
				first = it.rec.Accepted
			}
		}
		if !first.IsZero() {
			st.oldest = max(now.Sub(first), 0)
		}
		out = append(out, st)
	}
	return out
}
