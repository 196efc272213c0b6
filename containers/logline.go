package containers

import (
	"time"
)

// LogLine is one line a container printed, as Follow delivers it.
type LogLine struct {
	Stream string // stdout or stderr
	Text   string
	// Time is when the engine received the line; set by LogsBetween only.
	Time time.Time
	// Dropped counts the lines this follower missed just before this one
	// because it did not keep up.
	Dropped int
}

// MaxLogTail is the most history lines Logs returns.
const MaxLogTail = 10000
