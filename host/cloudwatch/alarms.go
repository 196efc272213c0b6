package cloudwatch

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Metric alarms: PutMetricAlarm, DescribeAlarms, DeleteAlarms,
// SetAlarmState and DescribeAlarmHistory on typed inputs, the registry of
// alarms with their state and bounded history, and the hooks told of state
// changes. Evaluation is alarm_eval.go's, the files alarm_store.go's.

const (
	defaultMaxAlarms      = 5000
	defaultAlarmInterval  = 10 * time.Second
	maxHistoryPerAlarm    = 100
	maxAlarmNamesPerCall  = 100
	maxActions            = 5
	maxActionLen          = 1024
	maxDescriptionLen     = 1024
	maxStateReason        = 1023
	maxStateReasonData    = 4000
	maxTags               = 50
	maxTagKeyLen          = 128
	maxTagValueLen        = 256
	maxEvaluationSeconds  = 86400
	defaultDescribePage   = 50
	maxDescribePage       = 100
	defaultHistoryPage    = 100
	historyStateUpdate    = "StateUpdate"
	historyConfigUpdate   = "ConfigurationUpdate"
	alarmTypeMetric       = "MetricAlarm"
	alarmTypeComposite    = "CompositeAlarm"
	alarmOperatorsText    = "[ GreaterThanOrEqualToThreshold, GreaterThanThreshold, LessThanThreshold, LessThanOrEqualToThreshold ]"
	treatMissingDataText  = "[ breaching, notBreaching, ignore, missing ]"
	metricMathRefusalText = "The parameter Metrics is not served: mce evaluates single-metric alarms only " +
		"(Namespace, MetricName, Dimensions, Statistic or ExtendedStatistic), not metric math or Metrics Insights alarms."
)

// alarmConfig is what the evaluator needs of one alarm, checked once.
type alarmConfig struct {
	name      string
	gen       uint64 // the alarm's generation: a replaced alarm is a new one
	ns        string
	metric    string
	dims      []Dimension
	unit      string
	stat      statistic
	period    int32
	n, m      int
	op        string
	threshold float64
	treat     string
}

type alarmEntry struct {
	a       Alarm
	cfg     *alarmConfig
	tags    []Tag
	history []HistoryItem // oldest first, at most maxHistoryPerAlarm
}

// hookFunc is a registered OnStateChange function.
type hookFunc struct {
	id uint64
	f  func(a Alarm, old, new State)
}

// alarms is the registry. mu guards every field but those set at Open;
// fileMu orders the writes of alarm files (alarm_store.go).
type alarms struct {
	dir      string
	max      int
	interval time.Duration
	region   string
	account  string
	log      zerolog.Logger

	mu      sync.Mutex
	byName  map[string]*alarmEntry
	gen     uint64
	hooks   []hookFunc
	nextHid uint64

	fileMu sync.Mutex
}

// OnStateChange registers f, called after each change of an alarm's state
// (an evaluation or SetAlarmState; not PutMetricAlarm, which keeps an
// updated alarm's state) with the alarm as it now is and the states before
// and after. f runs on the goroutine that made the change, outside any
// lock, one change at a time per goroutine; it must return quickly (hand
// long work to a goroutine of its own). The returned function unregisters
// it.
func (s *Service) OnStateChange(f func(a Alarm, old, new State)) (remove func()) {
	al := s.al
	al.mu.Lock()
	al.nextHid++
	id := al.nextHid
	al.hooks = append(al.hooks, hookFunc{id, f})
	al.mu.Unlock()
	return func() {
		al.mu.Lock()
		al.hooks = slices.DeleteFunc(al.hooks, func(h hookFunc) bool { return h.id == id })
		al.mu.Unlock()
	}
}

// Alarms returns a copy of every alarm, sorted by name.
func (s *Service) Alarms() []Alarm {
	s.al.mu.Lock()
	defer s.al.mu.Unlock()
	out := make([]Alarm, 0, len(s.al.byName))
	for _, e := range s.al.byName {
		out = append(out, e.a)
	}
	slices.SortFunc(out, func(x, y Alarm) int { return strings.Compare(x.AlarmName, y.AlarmName) })
	return out
}

func (al *alarms) arn(name string) string {
	return "arn:aws:cloudwatch:" + al.region + ":" + al.account + ":alarm:" + name
}

// configs snapshots what the evaluator needs, sorted by name.
func (al *alarms) configs() []*alarmConfig {
	al.mu.Lock()
	out := make([]*alarmConfig, 0, len(al.byName))
	for _, e := range al.byName {
		out = append(out, e.cfg)
	}
	al.mu.Unlock()
	slices.SortFunc(out, func(x, y *alarmConfig) int { return strings.Compare(x.name, y.name) })
	return out
}

// transition applies an evaluation's verdict to the alarm c was taken
// from, when it is still that alarm and the verdict changes its state.
func (s *Service) transitionVerdict(c *alarmConfig, v verdict, now time.Time) {
	al := s.al
	al.mu.Lock()
	e := al.byName[c.name]
	if e == nil || e.cfg.gen != c.gen || e.a.StateValue == v.state {
		al.mu.Unlock()
		return
	}
	stat := c.stat.name
	reason, data := v.reason(&e.a, stat, c.m, now)
	al.mu.Unlock()
	s.setState(c.name, c.gen, v.state, reason, &data, now)
}

// setState moves the alarm name (of generation gen, or any when gen is 0)
// to state with reason, records the history item, writes the alarm's file
// and calls the hooks. It reports whether the alarm exists.
func (s *Service) setState(name string, gen uint64, state State, reason string, data *string, now time.Time) bool {
	al := s.al
	al.mu.Lock()
	e := al.byName[name]
	if e == nil || (gen != 0 && e.cfg.gen != gen) {
		al.mu.Unlock()
		return false
	}
	old := e.a.StateValue
	ts := Timestamp{now.UTC().Truncate(time.Millisecond)}
	e.a.StateReason = reason
	e.a.StateReasonData = data
	e.a.StateUpdatedTimestamp = ts
	changed := old != state
	if changed {
		e.a.StateValue = state
		e.a.StateTransitionedTimestamp = ts
		hd, _ := json.Marshal(map[string]any{
			"version":  "1.0",
			"oldState": map[string]any{"stateValue": old},
			"newState": map[string]any{"stateValue": state, "stateReason": reason},
		})
		al.addHistory(e, HistoryItem{AlarmName: name, AlarmType: alarmTypeMetric, Timestamp: ts, HistoryItemType: historyStateUpdate,
			HistorySummary: truncate("Alarm updated from "+string(old)+" to "+string(state), 255), HistoryData: truncate(string(hd), 4095)})
	}
	snap := e.a
	hooks := slices.Clone(al.hooks)
	al.mu.Unlock()
	s.persist(name)
	if changed {
		for _, h := range hooks {
			h.f(snap, old, state)
		}
	}
	return true
}

func (al *alarms) addHistory(e *alarmEntry, h HistoryItem) {
	if len(e.history) >= maxHistoryPerAlarm {
		e.history = slices.Delete(e.history, 0, len(e.history)-maxHistoryPerAlarm+1)
	}
	e.history = append(e.history, h)
}

// ---- PutMetricAlarm

func checkActions(param string, list []string) *APIError {
	if len(list) > maxActions {
		return invalidValue("The collection %s must not have a size greater than %d.", param, maxActions)
	}
	for i, a := range list {
		if len(a) == 0 || len(a) > maxActionLen || !strings.HasPrefix(a, "arn:") {
			return invalidValue("The value %s for parameter %s.member.%d is invalid: an action is an ARN of 1 to 1024 characters.", quoted(a), param, i+1)
		}
	}
	return nil
}

func checkAlarmName(param, name string) *APIError {
	if name == "" || len(name) > maxNameLen {
		return invalidValue("The value %s for parameter %s is invalid: 1 to 255 characters.", quoted(name), param)
	}
	return nil
}

// checkPutMetricAlarm validates in and builds the alarm's configuration.
func checkPutMetricAlarm(in *putMetricAlarmInput) (*alarmConfig, *APIError) {
	if in.AlarmName == nil {
		return nil, missing("AlarmName")
	}
	if e := checkAlarmName("AlarmName", *in.AlarmName); e != nil {
		return nil, e
	}
	if len(in.Metrics) > 0 {
		return nil, invalidValue(metricMathRefusalText)
	}
	if in.ThresholdMetricID != nil {
		return nil, invalidValue("The parameter ThresholdMetricId is not served: mce has no anomaly detection bands.")
	}
	if in.EvaluationCriteria != nil || in.EvaluationInterval != nil {
		return nil, invalidValue("The parameters EvaluationCriteria and EvaluationInterval are not served: mce evaluates single-metric alarms only.")
	}
	if in.AlarmDescription != nil && len(*in.AlarmDescription) > maxDescriptionLen {
		return nil, invalidValue("The parameter AlarmDescription must be at most %d characters.", maxDescriptionLen)
	}
	for _, l := range []struct {
		name string
		v    []string
	}{{"OKActions", in.OKActions}, {"AlarmActions", in.AlarmActions}, {"InsufficientDataActions", in.InsufficientDataActions}} {
		if e := checkActions(l.name, l.v); e != nil {
			return nil, e
		}
	}
	for _, req := range []struct {
		name string
		set  bool
	}{{"Namespace", in.Namespace != nil}, {"MetricName", in.MetricName != nil}, {"Period", in.Period != nil},
		{"EvaluationPeriods", in.EvaluationPeriods != nil}, {"Threshold", in.Threshold != nil}, {"ComparisonOperator", in.ComparisonOperator != nil}} {
		if !req.set {
			return nil, missing(req.name)
		}
	}
	dims, e := checkMetric(*in.Namespace, *in.MetricName, in.Dimensions)
	if e != nil {
		return nil, e
	}
	c := &alarmConfig{name: *in.AlarmName, ns: *in.Namespace, metric: *in.MetricName, dims: dims}
	switch {
	case (in.Statistic == nil) == (in.ExtendedStatistic == nil):
		return nil, invalidCombination("Exactly one of Statistic and ExtendedStatistic must be specified.")
	case in.Statistic != nil:
		st, ok := parseBasicStat(*in.Statistic)
		if !ok {
			return nil, invalidValue("The parameter Statistic must be a value in the set %s.", statisticsSetText)
		}
		c.stat = st
	default:
		st, ok := parsePercentile(*in.ExtendedStatistic)
		if !ok {
			if otherExtended(*in.ExtendedStatistic) {
				return nil, invalidValue("The value %s for parameter ExtendedStatistic is not served: mce computes percentiles (p0.0 to p100) only.", quoted(*in.ExtendedStatistic))
			}
			return nil, invalidValue("The value %s for parameter ExtendedStatistic is invalid: a percentile between p0.0 and p100, such as p99 or p99.9.", quoted(*in.ExtendedStatistic))
		}
		c.stat = st
	}
	if in.EvaluateLowSampleCountPercentile != nil && *in.EvaluateLowSampleCountPercentile != "evaluate" && *in.EvaluateLowSampleCountPercentile != "ignore" {
		return nil, invalidValue("The parameter EvaluateLowSampleCountPercentile must be a value in the set [ evaluate, ignore ].")
	}
	p := *in.Period
	if p != 10 && p != 30 && (p < 60 || p%60 != 0) {
		return nil, invalidValue("The parameter Period must be 10, 30, or a multiple of 60.")
	}
	c.period = p
	if *in.EvaluationPeriods < 1 {
		return nil, invalidValue("The parameter EvaluationPeriods must be greater than or equal to 1.")
	}
	if int64(p)*int64(*in.EvaluationPeriods) > maxEvaluationSeconds {
		return nil, invalidValue("Metrics cannot be checked across more than a day (EvaluationPeriods * Period must be <= 86400).")
	}
	c.n, c.m = int(*in.EvaluationPeriods), int(*in.EvaluationPeriods)
	if in.DatapointsToAlarm != nil {
		if *in.DatapointsToAlarm < 1 {
			return nil, invalidValue("The parameter DatapointsToAlarm must be greater than or equal to 1.")
		}
		if *in.DatapointsToAlarm > *in.EvaluationPeriods {
			return nil, invalidCombination("DatapointsToAlarm must be less than or equal to EvaluationPeriods.")
		}
		c.m = int(*in.DatapointsToAlarm)
	}
	if math.IsNaN(*in.Threshold) || math.IsInf(*in.Threshold, 0) {
		return nil, invalidValue("The parameter Threshold must be a finite number.")
	}
	c.threshold = *in.Threshold
	switch op := *in.ComparisonOperator; op {
	case "GreaterThanOrEqualToThreshold", "GreaterThanThreshold", "LessThanThreshold", "LessThanOrEqualToThreshold":
		c.op = op
	case "LessThanLowerOrGreaterThanUpperThreshold", "LessThanLowerThreshold", "GreaterThanUpperThreshold":
		return nil, invalidValue("The value %s for parameter ComparisonOperator is not served: it compares with an anomaly detection band, which mce does not compute. Use one of %s.", op, alarmOperatorsText)
	default:
		return nil, invalidValue("The parameter ComparisonOperator must be a value in the set %s.", alarmOperatorsText)
	}
	c.treat = "missing"
	if in.TreatMissingData != nil {
		switch t := *in.TreatMissingData; t {
		case "breaching", "notBreaching", "ignore", "missing":
			c.treat = t
		default:
			return nil, invalidValue("The parameter TreatMissingData must be a value in the set %s.", treatMissingDataText)
		}
	}
	unit, e := checkUnit("Unit", in.Unit, invalidValue)
	if e != nil {
		return nil, e
	}
	c.unit = unit
	if len(in.Tags) > maxTags {
		return nil, invalidValue("The collection Tags must not have a size greater than %d.", maxTags)
	}
	for i, t := range in.Tags {
		if t.Key == "" || len(t.Key) > maxTagKeyLen || len(t.Value) > maxTagValueLen {
			return nil, invalidValue("The parameter Tags.member.%d is invalid: a key of 1 to 128 characters and a value of at most 256.", i+1)
		}
	}
	return c, nil
}

func (s *Service) putMetricAlarm(in *putMetricAlarmInput) (*emptyOutput, *APIError) {
	c, e := checkPutMetricAlarm(in)
	if e != nil {
		return nil, e
	}
	now := s.st.now().UTC().Truncate(time.Millisecond)
	ts := Timestamp{now}
	a := Alarm{
		AlarmName: c.name, AlarmArn: s.al.arn(c.name), AlarmDescription: in.AlarmDescription,
		AlarmConfigurationUpdatedTimestamp: ts, ActionsEnabled: in.ActionsEnabled == nil || *in.ActionsEnabled,
		OKActions: nonNil(in.OKActions), AlarmActions: nonNil(in.AlarmActions), InsufficientDataActions: nonNil(in.InsufficientDataActions),
		MetricName: c.metric, Namespace: c.ns, Statistic: in.Statistic, ExtendedStatistic: in.ExtendedStatistic,
		Dimensions: nonNil(c.dims), Period: c.period, Unit: in.Unit, EvaluationPeriods: int32(c.n),
		DatapointsToAlarm: in.DatapointsToAlarm, Threshold: c.threshold, ComparisonOperator: c.op, TreatMissingData: c.treat,
		EvaluateLowSampleCountPercentile: in.EvaluateLowSampleCountPercentile,
	}
	al := s.al
	al.mu.Lock()
	old := al.byName[c.name]
	if old == nil && len(al.byName) >= al.max {
		al.mu.Unlock()
		return nil, limitExceeded("The maximum number of alarms (%d) has been reached: delete alarms before creating more (mce's bound, Options.MaxAlarms).", al.max)
	}
	al.gen++
	c.gen = al.gen
	summary := "Alarm \"" + c.name + "\" created"
	e2 := &alarmEntry{}
	if old != nil {
		// CloudWatch: an update keeps the state and overwrites the
		// configuration; tags given with an update are ignored.
		e2 = old
		a.StateValue, a.StateReason, a.StateReasonData = old.a.StateValue, old.a.StateReason, old.a.StateReasonData
		a.StateUpdatedTimestamp, a.StateTransitionedTimestamp = old.a.StateUpdatedTimestamp, old.a.StateTransitionedTimestamp
		summary = "Alarm \"" + c.name + "\" updated"
	} else {
		a.StateValue, a.StateReason = StateInsufficientData, "Unchecked: Initial alarm creation"
		a.StateUpdatedTimestamp, a.StateTransitionedTimestamp = ts, ts
		e2.tags = slices.Clone(in.Tags)
	}
	e2.a, e2.cfg = a, c
	hd, _ := json.Marshal(map[string]any{"version": "1.0", "type": map[bool]string{true: "Update", false: "Create"}[old != nil], "updatedAlarm": a})
	al.addHistory(e2, HistoryItem{AlarmName: c.name, AlarmType: alarmTypeMetric, Timestamp: ts, HistoryItemType: historyConfigUpdate,
		HistorySummary: truncate(summary, 255), HistoryData: truncate(string(hd), 4095)})
	al.byName[c.name] = e2
	al.mu.Unlock()
	if err := s.persist(c.name); err != nil {
		return nil, internalError("The alarm could not be written to mce's state folder.")
	}
	return &emptyOutput{}, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ---- DescribeAlarms

func (s *Service) describeAlarms(in *describeAlarmsInput) (*describeAlarmsOutput, *APIError) {
	if len(in.AlarmNames) > maxAlarmNamesPerCall {
		return nil, invalidValue("The collection AlarmNames must not have a size greater than %d.", maxAlarmNamesPerCall)
	}
	for i, n := range in.AlarmNames {
		if e := checkAlarmName("AlarmNames.member."+itoa(i+1), n); e != nil {
			return nil, e
		}
	}
	if len(in.AlarmNames) > 0 && in.AlarmNamePrefix != nil {
		return nil, invalidCombination("The parameters AlarmNames and AlarmNamePrefix are mutually exclusive.")
	}
	if in.AlarmNamePrefix != nil {
		if e := checkAlarmName("AlarmNamePrefix", *in.AlarmNamePrefix); e != nil {
			return nil, e
		}
	}
	if in.StateValue != nil && !validState(*in.StateValue) {
		return nil, invalidValue("The parameter StateValue must be a value in the set [ OK, ALARM, INSUFFICIENT_DATA ].")
	}
	if in.ActionPrefix != nil && (*in.ActionPrefix == "" || len(*in.ActionPrefix) > maxActionLen) {
		return nil, invalidValue("The parameter ActionPrefix must be 1 to 1024 characters.")
	}
	wantMetric, e := alarmTypes(in.AlarmTypes)
	if e != nil {
		return nil, e
	}
	page := defaultDescribePage
	if in.MaxRecords != nil {
		if *in.MaxRecords < 1 || *in.MaxRecords > maxDescribePage {
			return nil, invalidValue("The parameter MaxRecords must be between 1 and %d.", maxDescribePage)
		}
		page = int(*in.MaxRecords)
	}
	var after string
	if in.NextToken != nil {
		a, ok := parseNameToken(*in.NextToken)
		if !ok {
			return nil, invalidNextToken()
		}
		after = a
	}
	out := &describeAlarmsOutput{CompositeAlarms: []struct{}{}, MetricAlarms: []Alarm{}}
	// Composite alarms (and so their children and parents) do not exist in mce.
	if !wantMetric || in.ChildrenOfAlarmName != nil || in.ParentsOfAlarmName != nil {
		return out, nil
	}
	s.al.mu.Lock()
	var list []Alarm
	for name, en := range s.al.byName {
		if after != "" && name <= after {
			continue
		}
		if len(in.AlarmNames) > 0 && !slices.Contains(in.AlarmNames, name) {
			continue
		}
		if in.AlarmNamePrefix != nil && !strings.HasPrefix(name, *in.AlarmNamePrefix) {
			continue
		}
		if in.StateValue != nil && string(en.a.StateValue) != *in.StateValue {
			continue
		}
		if in.ActionPrefix != nil && !hasActionPrefix(&en.a, *in.ActionPrefix) {
			continue
		}
		list = append(list, en.a)
	}
	s.al.mu.Unlock()
	slices.SortFunc(list, func(x, y Alarm) int { return strings.Compare(x.AlarmName, y.AlarmName) })
	if len(list) > page {
		list = list[:page]
		tok := nameToken(list[page-1].AlarmName)
		out.NextToken = &tok
	}
	out.MetricAlarms = nonNil(list)
	return out, nil
}

// alarmTypes reads AlarmTypes: whether metric alarms are asked for (the
// default when it is empty).
func alarmTypes(types []string) (bool, *APIError) {
	if len(types) == 0 {
		return true, nil
	}
	metric := false
	for i, t := range types {
		switch t {
		case alarmTypeMetric:
			metric = true
		case alarmTypeComposite:
		default:
			return false, invalidValue("The parameter AlarmTypes.member.%d must be a value in the set [ CompositeAlarm, MetricAlarm ].", i+1)
		}
	}
	return metric, nil
}

func hasActionPrefix(a *Alarm, prefix string) bool {
	for _, l := range [][]string{a.OKActions, a.AlarmActions, a.InsufficientDataActions} {
		for _, x := range l {
			if strings.HasPrefix(x, prefix) {
				return true
			}
		}
	}
	return false
}

// nameToken pages by name: the last name answered.
func nameToken(name string) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{2}, name...))
}

func parseNameToken(tok string) (string, bool) {
	if len(tok) > 4*maxNameLen {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 2 || b[0] != 2 || len(b) > maxNameLen+1 {
		return "", false
	}
	return string(b[1:]), true
}

// ---- DeleteAlarms

func (s *Service) deleteAlarms(in *deleteAlarmsInput) (*emptyOutput, *APIError) {
	if in.AlarmNames == nil {
		return nil, missing("AlarmNames")
	}
	if len(in.AlarmNames) > maxAlarmNamesPerCall {
		return nil, invalidValue("The collection AlarmNames must not have a size greater than %d.", maxAlarmNamesPerCall)
	}
	for i, n := range in.AlarmNames {
		if e := checkAlarmName("AlarmNames.member."+itoa(i+1), n); e != nil {
			return nil, e
		}
	}
	// As CloudWatch: names that are no alarm are passed over, the others
	// deleted.
	var gone []string
	s.al.mu.Lock()
	for _, n := range in.AlarmNames {
		if _, ok := s.al.byName[n]; ok {
			delete(s.al.byName, n)
			gone = append(gone, n)
		}
	}
	s.al.mu.Unlock()
	for _, n := range gone {
		if err := s.persist(n); err != nil {
			return nil, internalError("An alarm's file could not be removed from mce's state folder.")
		}
	}
	return &emptyOutput{}, nil
}

// ---- SetAlarmState

func (s *Service) setAlarmState(in *setAlarmStateInput) (*emptyOutput, *APIError) {
	for _, req := range []struct {
		name string
		set  bool
	}{{"AlarmName", in.AlarmName != nil}, {"StateValue", in.StateValue != nil}, {"StateReason", in.StateReason != nil}} {
		if !req.set {
			return nil, missing(req.name)
		}
	}
	if e := checkAlarmName("AlarmName", *in.AlarmName); e != nil {
		return nil, e
	}
	if !validState(*in.StateValue) {
		return nil, invalidValue("The parameter StateValue must be a value in the set [ OK, ALARM, INSUFFICIENT_DATA ].")
	}
	if len(*in.StateReason) > maxStateReason {
		return nil, invalidValue("The parameter StateReason must be at most %d characters.", maxStateReason)
	}
	if in.StateReasonData != nil {
		if len(*in.StateReasonData) > maxStateReasonData {
			return nil, invalidValue("The parameter StateReasonData must be at most %d characters.", maxStateReasonData)
		}
		if !json.Valid([]byte(*in.StateReasonData)) {
			return nil, newErr(http.StatusBadRequest, "InvalidFormat", "InvalidFormatFault", "The parameter StateReasonData is not JSON.")
		}
	}
	if !s.setState(*in.AlarmName, 0, State(*in.StateValue), *in.StateReason, in.StateReasonData, s.st.now()) {
		return nil, resourceNotFound("Alarm %s not found", quoted(*in.AlarmName))
	}
	return &emptyOutput{}, nil
}

// ---- DescribeAlarmHistory

func (s *Service) describeAlarmHistory(in *describeAlarmHistoryInput) (*describeAlarmHistoryOutput, *APIError) {
	if in.AlarmName != nil {
		if e := checkAlarmName("AlarmName", *in.AlarmName); e != nil {
			return nil, e
		}
	}
	wantMetric, e := alarmTypes(in.AlarmTypes)
	if e != nil {
		return nil, e
	}
	if in.HistoryItemType != nil {
		switch *in.HistoryItemType {
		case historyConfigUpdate, historyStateUpdate, "Action", "AlarmContributorStateUpdate", "AlarmContributorAction":
		default:
			return nil, invalidValue("The parameter HistoryItemType must be a value in the set [ ConfigurationUpdate, StateUpdate, Action, AlarmContributorStateUpdate, AlarmContributorAction ].")
		}
	}
	if in.StartDate != nil && in.EndDate != nil && in.StartDate.After(in.EndDate.Time) {
		return nil, invalidValue("The parameter StartDate must be less than the parameter EndDate.")
	}
	page := defaultHistoryPage
	if in.MaxRecords != nil {
		if *in.MaxRecords < 1 || *in.MaxRecords > maxDescribePage {
			return nil, invalidValue("The parameter MaxRecords must be between 1 and %d.", maxDescribePage)
		}
		page = int(*in.MaxRecords)
	}
	desc := true
	if in.ScanBy != nil {
		switch *in.ScanBy {
		case scanByDescending:
		case scanByAscending:
			desc = false
		default:
			return nil, invalidValue("The parameter ScanBy must be a value in the set [ %s, %s ].", scanByDescending, scanByAscending)
		}
	}
	fp := historyFingerprint(in)
	offset := 0
	if in.NextToken != nil {
		if len(*in.NextToken) > 64 {
			return nil, invalidNextToken()
		}
		o, ok := parseDataToken(*in.NextToken, fp)
		if !ok {
			return nil, invalidNextToken()
		}
		offset = o
	}
	var items []HistoryItem
	if wantMetric && in.AlarmContributorID == nil {
		s.al.mu.Lock()
		for name, en := range s.al.byName {
			if in.AlarmName != nil && name != *in.AlarmName {
				continue
			}
			for _, h := range en.history {
				if in.HistoryItemType != nil && h.HistoryItemType != *in.HistoryItemType {
					continue
				}
				if in.StartDate != nil && h.Timestamp.Before(in.StartDate.Time) || in.EndDate != nil && h.Timestamp.After(in.EndDate.Time) {
					continue
				}
				items = append(items, h)
			}
		}
		s.al.mu.Unlock()
	}
	slices.SortStableFunc(items, func(x, y HistoryItem) int {
		if c := x.Timestamp.Compare(y.Timestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(x.AlarmName, y.AlarmName)
	})
	if desc {
		slices.Reverse(items)
	}
	if offset > len(items) {
		return nil, invalidNextToken()
	}
	out := &describeAlarmHistoryOutput{AlarmHistoryItems: []HistoryItem{}}
	end := min(len(items), offset+page)
	out.AlarmHistoryItems = append(out.AlarmHistoryItems, items[offset:end]...)
	if end < len(items) {
		tok := dataToken(end, fp)
		out.NextToken = &tok
	}
	return out, nil
}

// historyFingerprint identifies a DescribeAlarmHistory request but for
// its NextToken.
func historyFingerprint(in *describeAlarmHistoryInput) uint64 {
	c := *in
	c.NextToken = nil
	b, _ := json.Marshal(&c)
	return fnv64(b)
}
