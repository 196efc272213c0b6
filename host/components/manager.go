package components

import (
	"context"
	"github.com/mce-run/mce/host/deploy"
	"github.com/mce-run/mce/internal/awsclock"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/background"
)

// Manager owns the inference components: their records, the registry by
// name, the copies' numbers, placement requests and launches, reconcile,
// deletion, adapters and recovery after a restart. It is safe for
// concurrent use; build it with NewManager.
type Manager struct {
	engine     containers.Engine
	placer     containers.CopyPlacer
	adapters   containers.AdapterStore // nil when the engine has no folders of adapters
	store      *store.Store
	endpoint   func(name string) HostEndpoint
	model      func(name string) (spec.CreateModelInput, string, error)
	checkURL   func(url, baseDir string) error
	region     string
	account    string
	timeout    time.Duration
	room       func() (room, limit int, ok bool)
	check      func(delta int) error
	noCapacity func(component string)
	bg         *background.Group
	ctx        context.Context // bg's: the Manager's lifetime
	log        zerolog.Logger
	clock      *awsclock.Clock
	alarms     deploy.AlarmSource

	mu     sync.RWMutex
	byName map[string]*Component // by lower-cased name
	// place serializes placement decisions across all components.
	place  sync.Mutex
	issued map[string]int // by lower-cased endpoint: the highest copy number handed out (under place)
}

// Options are what a Manager is built from. Zero values are the defaults
// named; the fields without one are required.
type Options struct {
	// Engine launches, adopts and stops the copies, each one generation of
	// its endpoint. What it offers beyond containers.Engine is found by
	// type assertion: containers.CopyPlacer (where copies go; without it,
	// each copy's launch decides, as containers.LaunchPlacer places) and
	// containers.AdapterStore (the copies' folders of adapters; without
	// it, adapter inference components are refused).
	Engine containers.Engine
	// Store keeps the records (store.InferenceComponents).
	Store *store.Store
	// Endpoint finds the endpoint of a name; nil when there is none.
	Endpoint func(name string) HostEndpoint
	// Model finds the model a specification names (ModelName): its
	// definition, the folder its relative file:// URLs resolve against,
	// or the error that it does not exist. nil: no model exists.
	Model func(name string) (model spec.CreateModelInput, baseDir string, err error)
	// CheckModelData checks the ArtifactUrl of a specification or an
	// adapter (a relative file:// URL starting at baseDir) when it is
	// given, so that a refused path is heard of at once; its error is the
	// caller's mistake. nil skips the check.
	CheckModelData func(url, baseDir string) error
	// Region and Account name the components' ARNs; default us-east-1 and
	// 123456789012.
	Region, Account string
	// ContainerTimeout bounds the drain of a copy leaving service and each
	// call of a container's adapter API; default 60 s.
	ContainerTimeout time.Duration
	// ContainerRoom is how many more containers mce serve --max-containers
	// allows, all endpoints and copies together, and that limit; ok is
	// false when there is none. nil: no limit.
	ContainerRoom func() (room, limit int, ok bool)
	// CheckContainers refuses delta more containers with SageMaker's
	// ResourceLimitExceeded when they would pass that limit. nil: no limit.
	CheckContainers func(delta int) error
	// NoCapacity is told of each call refused because the component
	// (named in its own spelling) had no copy to take it: SageMaker's
	// NoCapacityInvocationFailures. nil: not told.
	NoCapacity func(component string)
	// Background runs the work that outlives a call (placing, launching,
	// draining and removing copies); its context is the Manager's
	// lifetime, and stopping it aborts launches in progress.
	Background *background.Group
	Logger     zerolog.Logger
	// Clock is the clock of the waits of a rolling update's
	// DeploymentConfig (WaitIntervalInSeconds); nil: the wall clock.
	Clock *awsclock.Clock
	// Alarms is where the alarms of a rolling update's
	// AutoRollbackConfiguration are read; nil: no CloudWatch (an update
	// naming alarms is refused).
	Alarms deploy.AlarmSource
}

// HostEndpoint is what the Manager needs of the endpoint that hosts a
// component.
type HostEndpoint interface {
	// State is the endpoint's record now.
	State() EndpointState
	// Deleting reports whether the endpoint is being deleted.
	Deleting() bool
	// UnlessDeleting runs f under the endpoint's lock unless the endpoint
	// is being deleted (or is no longer the endpoint of its name); ran
	// reports whether f ran. A deletion marks the endpoint under the same
	// lock before it collects the endpoint's components, so a component f
	// registers is either collected with them or never registered: no
	// component outlives its endpoint. f must not call State.
	UnlessDeleting(f func() error) (ran bool, err error)
}

// EndpointState is an endpoint's record as the Manager reads it.
type EndpointState struct {
	Name       string // as created
	ARN        string
	ConfigName string
	Status     spec.Status
	Plan       containers.EndpointPlan
}

// NewManager builds a Manager from opts; it holds no component until
// Create or Recover.
func NewManager(opts Options) *Manager {
	m := &Manager{engine: opts.Engine, store: opts.Store, endpoint: opts.Endpoint, model: opts.Model, checkURL: opts.CheckModelData,
		region: opts.Region, account: opts.Account, timeout: opts.ContainerTimeout, room: opts.ContainerRoom, check: opts.CheckContainers, noCapacity: opts.NoCapacity,
		bg: opts.Background, ctx: opts.Background.Context(), log: opts.Logger, clock: opts.Clock, alarms: opts.Alarms}
	if m.region == "" {
		m.region = "us-east-1"
	}
	if m.account == "" {
		m.account = "123456789012"
	}
	if m.timeout <= 0 {
		m.timeout = 60 * time.Second
	}
	if m.model == nil {
		m.model = func(name string) (spec.CreateModelInput, string, error) {
			return spec.CreateModelInput{}, "", &spec.NotFoundError{Kind: spec.KindModel, Name: name, ARN: m.arn(spec.KindModel, name)}
		}
	}
	m.placer = containers.LaunchPlacer{}
	if p, ok := opts.Engine.(containers.CopyPlacer); ok {
		m.placer = p
	}
	m.adapters, _ = opts.Engine.(containers.AdapterStore)
	return m
}

func (m *Manager) arn(kind spec.Kind, name string) string {
	return spec.ARN(m.region, m.account, kind, name)
}

// Get returns the component of a name (case-insensitively), nil when there
// is none.
func (m *Manager) Get(name string) *Component {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.byName[strings.ToLower(name)]
}

// add adds c unless its name is taken.
func (m *Manager) add(c *Component) bool {
	k := strings.ToLower(c.name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byName[k]; ok {
		return false
	}
	if m.byName == nil {
		m.byName = map[string]*Component{}
	}
	m.byName[k] = c
	return true
}

// remove removes c, if it is still the component of its name.
func (m *Manager) remove(c *Component) {
	k := strings.ToLower(c.name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byName[k] == c {
		delete(m.byName, k)
	}
}

// All lists the components by name.
func (m *Manager) All() []*Component {
	m.mu.RLock()
	out := make([]*Component, 0, len(m.byName))
	for _, c := range m.byName {
		out = append(out, c)
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Component) int { return strings.Compare(a.name, b.name) })
	return out
}

// OfEndpoint lists the components placed on an endpoint, by name.
func (m *Manager) OfEndpoint(endpoint string) []*Component {
	var out []*Component
	for _, c := range m.All() {
		if strings.EqualFold(c.endpoint, endpoint) {
			out = append(out, c)
		}
	}
	return out
}

// PlacedCopies is how many copies are placed (launching or running), all
// components together: each is one container against --max-containers.
func (m *Manager) PlacedCopies() int {
	n := 0
	for _, c := range m.All() {
		c.mu.Lock()
		n += len(c.rec.Copies)
		c.mu.Unlock()
	}
	return n
}
