package applicationautoscaling

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Schedules of scheduled actions, as Application Auto Scaling writes them:
//
//	at(yyyy-mm-ddThh:mm:ss)             once, in the action's Timezone
//	rate(value unit)                    every value minutes, hours or days
//	cron(minutes hours day-of-month month day-of-week year)
//
// cron takes numbers, *, ranges (a-b), lists (a,b), steps (*/n, a/n,
// a-b/n), month and day names (JAN, MON), and ? for one of the two day
// fields; its day of week runs from 1 (SUN) to 7 (SAT). mce does not
// serve L, W and # (last day, weekday, nth weekday): they are refused.

type schedule struct {
	kind  string // at, rate, cron
	at    time.Time
	every time.Duration
	cron  *cronSpec
	loc   *time.Location
}

var (
	atRe   = regexp.MustCompile(`^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$`)
	rateRe = regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$`)
	cronRe = regexp.MustCompile(`^cron\((.*)\)$`)
)

// parseSchedule reads a schedule in the timezone tz ("" is UTC).
func parseSchedule(expr, tz string) (*schedule, error) {
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return nil, fmt.Errorf("the Timezone %q is not an IANA time zone mce knows", tz)
		}
		loc = l
	}
	sc := &schedule{loc: loc}
	switch {
	case atRe.MatchString(expr):
		t, err := time.ParseInLocation("2006-01-02T15:04:05", atRe.FindStringSubmatch(expr)[1], loc)
		if err != nil {
			return nil, fmt.Errorf("the time of %q is not a valid date and time", expr)
		}
		sc.kind, sc.at = "at", t
	case rateRe.MatchString(expr):
		m := rateRe.FindStringSubmatch(expr)
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 1 || n > 100000 {
			return nil, fmt.Errorf("the rate of %q must be between 1 and 100000", expr)
		}
		if n == 1 && strings.HasSuffix(m[2], "s") || n > 1 && !strings.HasSuffix(m[2], "s") {
			return nil, fmt.Errorf("the unit of %q must be singular for 1 and plural otherwise", expr)
		}
		unit := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}[strings.TrimSuffix(m[2], "s")]
		sc.kind, sc.every = "rate", time.Duration(n)*unit
	case cronRe.MatchString(expr):
		c, err := parseCron(cronRe.FindStringSubmatch(expr)[1])
		if err != nil {
			return nil, err
		}
		sc.kind, sc.cron = "cron", c
	default:
		return nil, fmt.Errorf("the schedule %q is none of at(yyyy-mm-ddThh:mm:ss), rate(value unit) and cron(fields)", expr)
	}
	return sc, nil
}

// next is the first run strictly after after, and whether there is one.
// A rate runs from start (the action's StartTime or creation).
func (sc *schedule) next(after, start time.Time) (time.Time, bool) {
	switch sc.kind {
	case "at":
		return sc.at, sc.at.After(after)
	case "rate":
		if after.Before(start) {
			return start, true
		}
		n := after.Sub(start)/sc.every + 1
		return start.Add(n * sc.every), true
	}
	return sc.cron.next(after.In(sc.loc))
}

type cronSpec struct {
	min, hour, dom, mon, dow []bool
	years                    []bool // 1970..2199
	anyDom, anyDow           bool
}

var (
	monthNames = map[string]int{"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12}
	dayNames   = map[string]int{"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}
)

func parseCron(s string) (*cronSpec, error) {
	f := strings.Fields(s)
	if len(f) != 6 {
		return nil, fmt.Errorf("a cron expression has 6 fields (minutes hours day-of-month month day-of-week year), not %d", len(f))
	}
	c := &cronSpec{}
	var err error
	parse := func(i int, lo, hi int, names map[string]int) []bool {
		if err != nil {
			return nil
		}
		var v []bool
		v, err = parseField(f[i], lo, hi, names)
		return v
	}
	c.min = parse(0, 0, 59, nil)
	c.hour = parse(1, 0, 23, nil)
	c.dom = parse(2, 1, 31, nil)
	c.mon = parse(3, 1, 12, monthNames)
	c.dow = parse(4, 1, 7, dayNames)
	c.years = parse(5, 1970, 2199, nil)
	if err != nil {
		return nil, err
	}
	c.anyDom, c.anyDow = f[2] == "?", f[4] == "?"
	if c.anyDom == c.anyDow {
		return nil, fmt.Errorf("one of day-of-month and day-of-week must be ? (and only one)")
	}
	return c, nil
}

func parseField(f string, lo, hi int, names map[string]int) ([]bool, error) {
	set := make([]bool, hi+1)
	if f == "?" || f == "*" {
		for i := lo; i <= hi; i++ {
			set[i] = true
		}
		return set, nil
	}
	num := func(x string) (int, error) {
		if n, ok := names[strings.ToUpper(x)]; ok {
			return n, nil
		}
		if u := strings.ToUpper(x); strings.Contains(u, "#") || strings.HasSuffix(u, "L") || strings.HasSuffix(u, "W") {
			return 0, fmt.Errorf("mce does not serve L, W and # in cron expressions (the field %q)", f)
		}
		n, err := strconv.Atoi(x)
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("the cron field %q is out of its range %d-%d", f, lo, hi)
		}
		return n, nil
	}
	for _, part := range strings.Split(f, ",") {
		rng, stepS, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepS)
			if err != nil || n < 1 || n > hi {
				return nil, fmt.Errorf("the cron step %q is not valid", part)
			}
			step = n
		}
		a, b := lo, hi
		if rng != "*" {
			x, y, isRange := strings.Cut(rng, "-")
			var err error
			if a, err = num(x); err != nil {
				return nil, err
			}
			b = a
			if isRange {
				if b, err = num(y); err != nil {
					return nil, err
				}
			} else if hasStep {
				b = hi
			}
			if a > b {
				return nil, fmt.Errorf("the cron range %q runs backwards", rng)
			}
		}
		for i := a; i <= b; i += step {
			set[i] = true
		}
	}
	return set, nil
}

// next is the first minute strictly after t that the expression matches,
// looked for over the next five years.
func (c *cronSpec) next(t time.Time) (time.Time, bool) {
	loc := t.Location()
	t = t.Truncate(time.Minute).Add(time.Minute)
	limit := t.AddDate(5, 0, 0)
	for day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc); day.Before(limit); day = day.AddDate(0, 0, 1) {
		y := day.Year()
		if y > 2199 || !c.years[y] || !c.mon[int(day.Month())] {
			continue
		}
		if !c.anyDom && !c.dom[day.Day()] || !c.anyDow && !c.dow[int(day.Weekday())+1] {
			continue
		}
		for h := 0; h < 24; h++ {
			if !c.hour[h] {
				continue
			}
			for m := 0; m < 60; m++ {
				if !c.min[m] {
					continue
				}
				at := time.Date(y, day.Month(), day.Day(), h, m, 0, 0, loc)
				if at.Before(t) {
					continue
				}
				return at, true
			}
		}
	}
	return time.Time{}, false
}
