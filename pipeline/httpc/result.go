package httpc

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Outcome classifies how one exchange ended.
type Outcome int

const (
	OK         Outcome = iota
	Status             // the container answered a status outside 2xx
	TooBig             // a 2xx body over MaxBody
	DialFailed         // no connection could be made: nothing was sent
	Timeout            // Options.Timeout expired
	Canceled           // the caller's context is done (or its deadline, sooner than Timeout, passed)
	Broken             // any other transport failure, a malformed answer included
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case OK:
		return "OK"
	case Status:
		return "Status"
	case TooBig:
		return "TooBig"
	case DialFailed:
		return "DialFailed"
	case Timeout:
		return "Timeout"
	case Canceled:
		return "Canceled"
	case Broken:
		return "Broken"
	default:
		return "Outcome(" + strconv.Itoa(int(o)) + ")"
	}
}

// Result is what one exchange produced.
type Result struct {
	Outcome Outcome
	// Status is the container's HTTP status, 0 when it gave none.
	Status int
	// ContentType and CustomAttributes are the answer's first Content-Type
	// and X-Amzn-SageMaker-Custom-Attributes fields, "" when none.
	ContentType, CustomAttributes string
	// NewSessionID and ClosedSessionID are the answer's first
	// X-Amzn-SageMaker-New-Session-Id and -Closed-Session-Id fields (a
	// stateful session opened or closed), "" when none.
	NewSessionID, ClosedSessionID string
	// Length is the answer's Content-Length, -1 when it announced none.
	Length int64
	// ErrBody is the start of the body of an answer outside 2xx (Outcome
	// Status): at most MaxErrorBody bytes of valid UTF-8.
	ErrBody string
	// Elapsed is the time the exchange took.
	Elapsed time.Duration
	// Err is the transport or context error (Outcome DialFailed, Timeout,
	// Canceled, Broken).
	Err error
	// Body is the 2xx body read into memory (Outcome OK, without
	// Request.Stream). Whatever the outcome, its array may be passed back
	// to Do as dst: Do uses it as scratch space too.
	Body []byte
}

// MaxErrorBody caps, in bytes, the container body kept in Result.ErrBody.
const MaxErrorBody = 1024

// errorBodyDrain bounds how much of an error body is read and thrown away so
// the connection can be reused; beyond it the connection is closed instead.
const errorBodyDrain = 64 << 10

// clip returns b as valid UTF-8 of at most MaxErrorBody bytes, cut on a
// rune boundary; invalid sequences become U+FFFD.
func clip[T string | []byte](b T) string {
	s := string(b)
	if len(s) > 4*MaxErrorBody {
		s = s[:4*MaxErrorBody]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) > MaxErrorBody {
		cut := MaxErrorBody
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}
