package cloudwatch

// Alarms that another part of mce creates and owns (Application Auto
// Scaling's target tracking alarms): the same checks, registry, files and
// evaluation as PutMetricAlarm's, called in Go instead of over HTTP.

// AlarmSpec is a metric alarm's configuration as PutMetricAlarm takes it
// (its members, named as CloudWatch names them). Exactly one of Statistic
// and ExtendedStatistic is set; DatapointsToAlarm 0 means
// EvaluationPeriods; TreatMissingData "" means missing.
type AlarmSpec struct {
	AlarmName          string
	AlarmDescription   string
	AlarmActions       []string
	OKActions          []string
	Namespace          string
	MetricName         string
	Dimensions         []Dimension
	Statistic          string
	ExtendedStatistic  string
	Unit               string
	Period             int32
	EvaluationPeriods  int32
	DatapointsToAlarm  int32
	Threshold          float64
	ComparisonOperator string
	TreatMissingData   string
}

// PutAlarm creates the alarm spec names, or replaces its configuration
// keeping its state, as PutMetricAlarm does. A spec PutMetricAlarm would
// refuse is refused with the same *APIError.
func (s *Service) PutAlarm(spec AlarmSpec) error {
	in := &putMetricAlarmInput{
		AlarmName: &spec.AlarmName, AlarmActions: spec.AlarmActions, OKActions: spec.OKActions,
		Namespace: &spec.Namespace, MetricName: &spec.MetricName, Dimensions: spec.Dimensions,
		Period: &spec.Period, EvaluationPeriods: &spec.EvaluationPeriods, Threshold: &spec.Threshold,
		ComparisonOperator: &spec.ComparisonOperator,
	}
	opt := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	in.AlarmDescription, in.Statistic, in.ExtendedStatistic = opt(spec.AlarmDescription), opt(spec.Statistic), opt(spec.ExtendedStatistic)
	in.Unit, in.TreatMissingData = opt(spec.Unit), opt(spec.TreatMissingData)
	if spec.DatapointsToAlarm > 0 {
		in.DatapointsToAlarm = &spec.DatapointsToAlarm
	}
	if _, e := s.putMetricAlarm(in); e != nil {
		return e
	}
	return nil
}

// DeleteAlarms deletes the alarms named (names that are no alarm are
// passed over), as the DeleteAlarms operation does.
func (s *Service) DeleteAlarms(names ...string) error {
	for len(names) > 0 {
		n := min(len(names), maxAlarmNamesPerCall)
		if _, e := s.deleteAlarms(&deleteAlarmsInput{AlarmNames: names[:n]}); e != nil {
			return e
		}
		names = names[n:]
	}
	return nil
}

// Alarm returns a copy of the alarm name, and whether it exists.
func (s *Service) Alarm(name string) (Alarm, bool) {
	s.al.mu.Lock()
	defer s.al.mu.Unlock()
	e := s.al.byName[name]
	if e == nil {
		return Alarm{}, false
	}
	return e.a, true
}

// AlarmDatapoints is what an evaluation of the alarm name sees now: the
// values of the periods of its evaluation range that have data, oldest
// first. That is what AWS hands an alarm's actions each minute it stays in
// ALARM; StateReasonData holds only those of its last change. ok is false
// when there is no such alarm.
func (s *Service) AlarmDatapoints(name string) (points []float64, ok bool) {
	s.al.mu.Lock()
	var c *alarmConfig
	if e := s.al.byName[name]; e != nil {
		c = e.cfg
	}
	s.al.mu.Unlock()
	if c == nil {
		return nil, false
	}
	for _, p := range s.pointsOf(c, s.st.now().Unix()) {
		if p.ok {
			points = append(points, p.value)
		}
	}
	return points, true
}

// AlarmArn is the ARN CloudWatch gives the alarm name.
func (s *Service) AlarmArn(name string) string { return s.al.arn(name) }
