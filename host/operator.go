package host

import (
	"net/http"
	"time"

	"github.com/mce-run/mce/host/statuspage"
)

// The operator's listener: the metrics and the status page, whose Page
// sees the server's endpoints only through Inventory and the registry.

// newStatus makes the recorder of the server's invocations (fed where
// an invocation ends: invoke.go, stream.go, async_handler.go) and the
// status page that charts them.
func newStatus(s *Server) (*statuspage.Recorder, *statuspage.Page) {
	exists := func(name string) bool { return s.reg.get(name) != nil }
	series := statuspage.NewRecorder(time.Now(), exists)
	o := statuspage.Options{Inventory: s.Inventory, Exists: exists, Series: series, Logger: s.cfg.Logger}
	if cw := s.cfg.CloudWatch; cw != nil {
		o.Alarms = func() []statuspage.Alarm {
			as := cw.Alarms()
			out := make([]statuspage.Alarm, len(as))
			for i, a := range as {
				out[i] = statuspage.Alarm{Name: a.AlarmName, State: string(a.StateValue), Metric: a.MetricText(),
					Condition: a.ConditionText(), Reason: a.StateReason, Updated: a.StateUpdatedTimestamp.Time}
			}
			return out
		}
	}
	o.Scaling = scalingSource(s) // applicationautoscaling_handler.go
	return series, statuspage.New(o)
}

// OperatorHandler serves the operator's listener (mce serve
// --metrics-listen): GET /metrics, GET /status, GET /status.json, and GET /
// sending browsers to /status. Unauthenticated: mount it where only the
// operator reaches it.
func (s *Server) OperatorHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.MetricsHandler())
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/status", http.StatusFound)
	})
	mux.HandleFunc("GET /status", s.status.ServePage)
	mux.HandleFunc("GET /status.json", s.status.ServeJSON)
	return mux
}
