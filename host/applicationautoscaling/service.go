package applicationautoscaling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/internal/awsclock"
)

// TargetPrefix starts the X-Amz-Target of the service's calls.
const TargetPrefix = "AnyScaleFrontendService."

const contentType = "application/x-amz-json-1.1"

// The two scalable dimensions mce serves, and its one namespace.
const (
	Namespace          = "sagemaker"
	DimensionVariant   = "sagemaker:variant:DesiredInstanceCount"
	DimensionComponent = "sagemaker:inference-component:DesiredCopyCount"
)

// Targets is what the service reads and changes of SageMaker's resources.
// The host implements it with the paths of UpdateEndpointWeightsAndCapacities
// and UpdateInferenceComponentRuntimeConfig.
type Targets interface {
	// Capacity is the resource's current capacity (instances of a variant,
	// copies of a component) and whether the resource exists.
	Capacity(ctx context.Context, dimension, resourceID string) (current int, exists bool, err error)
	// SetCapacity asks for n. An error (the endpoint is updating, the
	// machine has no room) leaves the capacity as it was; the service
	// tries again at its next evaluation.
	SetCapacity(ctx context.Context, dimension, resourceID string, n int) error
}

// Options configure a Service.
type Options struct {
	// Dir is the service's state folder (<state>/applicationautoscaling).
	// Required; created when missing.
	Dir string
	// CloudWatch holds the alarms: target tracking's, which the service
	// creates, and the users' that name a step policy in their actions.
	// Required.
	CloudWatch *cloudwatch.Service
	// Clock is AWS time: cooldowns, schedules, timestamps. Nil: the wall
	// clock.
	Clock *awsclock.Clock
	// Interval is how often, in AWS time, policies are run for the alarms
	// in ALARM and scheduled actions come due (AWS: a minute). Default 1
	// minute.
	Interval time.Duration
	// Region and Account go into ARNs. Default us-east-1 and 000000000000.
	Region, Account string
	Logger          zerolog.Logger
	// Now overrides Clock's Now (tests that step time by hand).
	Now func() time.Time
}

// Bounds of what one account may hold (AWS's default quotas).
const (
	maxTargets          = 3000
	maxPoliciesTarget   = 50
	maxScheduledTarget  = 200
	maxActivitiesTarget = 100
	maxCapacity         = 1_000_000
	maxBody             = 1 << 20
)

// Service is the Application Auto Scaling API. It is safe for concurrent
// use. Open it, serve it with Serve, scale with Run, and Close it.
type Service struct {
	dir     string
	cw      *cloudwatch.Service
	clock   *awsclock.Clock
	nowFn   func() time.Time
	every   time.Duration
	region  string
	account string
	log     zerolog.Logger

	mu      sync.Mutex
	targets map[string]*target // by key(dimension, resource ID)
	res     Targets            // set by Run
	nudge   chan struct{}

	fileMu sync.Mutex
	// policyMu orders the changes of policies and targets, which make and
	// delete alarms outside mu: two puts of one policy make one set.
	policyMu sync.Mutex
	runMu    sync.Mutex    // one evaluation at a time
	seq      atomic.Uint64 // activities recorded (activityID)
}

// Open reads the targets kept in opts.Dir.
func Open(opts Options) (*Service, error) {
	if opts.Dir == "" || opts.CloudWatch == nil {
		return nil, errors.New("applicationautoscaling: Options.Dir and Options.CloudWatch are required")
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Minute
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Account == "" {
		opts.Account = "000000000000"
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("applicationautoscaling: %w", err)
	}
	s := &Service{dir: opts.Dir, cw: opts.CloudWatch, clock: opts.Clock, nowFn: opts.Now, every: opts.Interval, region: opts.Region,
		account: opts.Account, log: opts.Logger, targets: map[string]*target{}, nudge: make(chan struct{}, 1)}
	if err := s.load(); err != nil {
		return nil, fmt.Errorf("applicationautoscaling: %w", err)
	}
	return s, nil
}

func (s *Service) now() time.Time {
	if s.nowFn != nil {
		return s.nowFn().UTC()
	}
	return s.clock.Now().UTC()
}

// Run scales through t until ctx ends: each Options.Interval of AWS time,
// and at once when an alarm goes to ALARM, it runs the policies of the
// alarms in ALARM and the scheduled actions that came due. The API's
// calls that read capacities answer only while Run runs.
func (s *Service) Run(ctx context.Context, t Targets) {
	s.mu.Lock()
	s.res = t
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.res = nil
		s.mu.Unlock()
	}()
	remove := s.cw.OnStateChange(func(a cloudwatch.Alarm, _, now cloudwatch.State) {
		if now == cloudwatch.StateAlarm && len(a.AlarmActions) > 0 {
			select {
			case s.nudge <- struct{}{}:
			default:
			}
		}
	})
	defer remove()
	for {
		timer := s.clock.NewTimer(s.every)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-s.nudge:
			timer.Stop()
		}
		s.Evaluate(ctx)
	}
}

func (s *Service) resources() Targets {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.res
}

// Close releases nothing today: the files are written as they change. It
// is there so that mce serve closes the service like its others.
func (s *Service) Close() error { return nil }

// OperationOf is the operation an X-Amz-Target names ("" when none).
func OperationOf(r *http.Request) string {
	op, _ := strings.CutPrefix(r.Header.Get("X-Amz-Target"), TargetPrefix)
	return op
}

type handler func(s *Service, ctx context.Context, body []byte) (any, *APIError)

func op[In any](f func(s *Service, ctx context.Context, in *In) (any, *APIError)) handler {
	return func(s *Service, ctx context.Context, body []byte) (any, *APIError) {
		in := new(In)
		if len(strings.TrimSpace(string(body))) == 0 {
			body = []byte("{}")
		}
		if err := json.Unmarshal(body, in); err != nil {
			return nil, newErr(http.StatusBadRequest, codeSerialization, "The request body is not the operation's JSON: %s", jsonProblem(err))
		}
		return f(s, ctx, in)
	}
}

func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("the member %s cannot be a JSON %s.", te.Field, te.Value)
	}
	if errors.Is(err, errBadTimestamp) {
		return "a timestamp is out of range."
	}
	return "it does not parse."
}

var operations = map[string]handler{
	"RegisterScalableTarget":    op((*Service).register),
	"DescribeScalableTargets":   op((*Service).describeTargets),
	"DeregisterScalableTarget":  op((*Service).deregister),
	"PutScalingPolicy":          op((*Service).putPolicy),
	"DescribeScalingPolicies":   op((*Service).describePolicies),
	"DeleteScalingPolicy":       op((*Service).deletePolicy),
	"DescribeScalingActivities": op((*Service).describeActivities),
	"PutScheduledAction":        op((*Service).putScheduled),
	"DescribeScheduledActions":  op((*Service).describeScheduled),
	"DeleteScheduledAction":     op((*Service).deleteScheduled),
}

// notServed are the model's operations mce refuses, with why.
var notServed = map[string]string{
	"GetPredictiveScalingForecast": "mce runs no predictive scaling.",
	"ListTagsForResource":          "mce keeps no tags on scalable targets (RegisterScalableTarget accepts Tags and drops them).",
	"TagResource":                  "mce keeps no tags on scalable targets.",
	"UntagResource":                "mce keeps no tags on scalable targets.",
}

// Serve answers one call whose body host has read and whose caller it has
// authenticated; authorize decides the action
// ("application-autoscaling:RegisterScalableTarget" …) for that caller: an
// error refuses the call as AccessDeniedException with its text.
func (s *Service) Serve(w http.ResponseWriter, r *http.Request, body []byte, authorize func(ctx context.Context, r *http.Request, action string) error) {
	name := OperationOf(r)
	h := operations[name]
	if h == nil {
		msg := fmt.Sprintf("mce does not serve the operation %q of Application Auto Scaling.", r.Header.Get("X-Amz-Target"))
		if why, ok := notServed[name]; ok {
			msg = fmt.Sprintf("mce does not serve Application Auto Scaling's %s: %s", name, why)
		}
		WriteError(w, newErr(http.StatusBadRequest, codeUnknownOperation, "%s", msg))
		return
	}
	if authorize != nil {
		if err := authorize(r.Context(), r, "application-autoscaling:"+name); err != nil {
			var api *APIError
			if !errors.As(err, &api) {
				api = newErr(http.StatusBadRequest, codeAccessDenied, "%s", err.Error())
			}
			WriteError(w, api)
			return
		}
	}
	out, e := h(s, r.Context(), body)
	if e != nil {
		WriteError(w, e)
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		WriteError(w, internal("The answer could not be written."))
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// ServeHTTP serves the API without authorization (tests, a listener
// without credentials), reading at most 1 MiB of body.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		WriteError(w, newErr(http.StatusRequestEntityTooLarge, codeSerialization, "The request body is larger than mce accepts."))
		return
	}
	s.Serve(w, r, body, nil)
}
