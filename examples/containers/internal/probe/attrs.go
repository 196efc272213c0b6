package probe

import (
	"fmt"
	"mime"
	"strconv"
	"strings"
	"time"
)

// Bounds on the switches.
const (
	MaxSleep = 10 * time.Minute
	MaxSize  = 64 << 20
	// MaxParts bounds stream=N.
	MaxParts = 100000
	// maxGateName bounds gate= and open= names.
	maxGateName = 64
	// maxAttrsValue is SageMaker's limit on CustomAttributes (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html).
	maxAttrsValue = 1024
)

// Attributes are the switches parsed from X-Amzn-SageMaker-Custom-Attributes. Unset numeric fields are -1.
type Attributes struct {
	Crash       int
	Sleep       time.Duration
	Status      int
	ContentType string
	Size        int64
	// RespAttrs is the attrs= value; HasRespAttrs tells an empty value from none.
	RespAttrs    string
	HasRespAttrs bool
	Info         bool
	// Stream mode (stream=N): N parts written and flushed one by one, Every apart. After Cut parts the
	// connection is dropped, after Die parts the process exits (code 1), after Stall parts the answer
	// stops until the request is cancelled (each 0 when unset). With Gate set, the parts after the first
	// wait until a request with open=Gate arrives.
	Parts, Cut, Die, Stall int
	Every                  time.Duration
	Gate                   string
	// Open (open=NAME) opens gate NAME and answers 200.
	Open string
}

// ParseAttributes parses the header value: comma-separated entries, each "key=value" or a bare "info";
// keys it does not know are ignored so that real clients' attributes pass. A known key with a bad value
// is an error.
func ParseAttributes(h string) (Attributes, error) {
	a := Attributes{Crash: -1, Status: -1, Size: -1}
	for entry := range strings.SplitSeq(h, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(entry), "=")
		switch k {
		case "crash":
			c, err := strconv.Atoi(v)
			if err != nil || c < 0 || c > 255 {
				return a, fmt.Errorf("crash=%q: want an exit code 0-255", v)
			}
			a.Crash = c
		case "sleep":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > MaxSleep {
				return a, fmt.Errorf("sleep=%q: want a Go duration up to %s", v, MaxSleep)
			}
			a.Sleep = d
		case "status":
			s, err := strconv.Atoi(v)
			if err != nil || s < 200 || s > 599 {
				return a, fmt.Errorf("status=%q: want 200-599", v)
			}
			a.Status = s
		case "ct":
			if _, _, err := mime.ParseMediaType(v); err != nil {
				return a, fmt.Errorf("ct=%q: not a media type", v)
			}
			a.ContentType = v
		case "size":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n > MaxSize {
				return a, fmt.Errorf("size=%q: want 0-%d", v, MaxSize)
			}
			a.Size = n
		case "attrs":
			if len(v) > maxAttrsValue || !printableASCII(v) {
				return a, fmt.Errorf("attrs=%q: want at most %d printable ASCII characters", v, maxAttrsValue)
			}
			a.RespAttrs, a.HasRespAttrs = v, true
		case "info":
			a.Info = true
		case "stream", "cut", "die", "stall":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxParts {
				return a, fmt.Errorf("%s=%q: want 1-%d", k, v, MaxParts)
			}
			switch k {
			case "stream":
				a.Parts = n
			case "cut":
				a.Cut = n
			case "die":
				a.Die = n
			case "stall":
				a.Stall = n
			}
		case "every":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > MaxSleep {
				return a, fmt.Errorf("every=%q: want a Go duration up to %s", v, MaxSleep)
			}
			a.Every = d
		case "gate", "open":
			if v == "" || len(v) > maxGateName || !printableASCII(v) {
				return a, fmt.Errorf("%s=%q: want 1-%d printable ASCII characters", k, v, maxGateName)
			}
			if k == "gate" {
				a.Gate = v
			} else {
				a.Open = v
			}
		}
	}
	return a, nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
