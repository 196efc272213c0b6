package spec

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Status is the lifecycle state of an endpoint or inference component, with SageMaker's names
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeEndpoint.html).
type Status string

const (
	StatusCreating       Status = "Creating"
	StatusInService      Status = "InService"
	StatusUpdating       Status = "Updating"
	StatusSystemUpdating Status = "SystemUpdating" // relaunching after a restart of mce
	StatusFailed         Status = "Failed"
	StatusDeleting       Status = "Deleting"
	// Deployment guardrails (UpdateEndpoint's DeploymentConfig): traffic
	// goes back to the previous fleet; or it could not be rolled back.
	StatusRollingBack          Status = "RollingBack"
	StatusUpdateRollbackFailed Status = "UpdateRollbackFailed"
)

// MaxFailureReason is the length limit of an endpoint's or inference
// component's FailureReason (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeEndpoint.html).
const MaxFailureReason = 1024

// Epoch is a timestamp as awsJson1_1 encodes it: seconds since the epoch, a
// JSON number with millisecond precision (https://smithy.io/2.0/aws/protocols/aws-json-1_1-protocol.html).
type Epoch time.Time

func (t Epoch) MarshalJSON() ([]byte, error) {
	ms := time.Time(t).UnixMilli()
	return []byte(strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)), nil
}

func (t *Epoch) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil || math.IsInf(f, 0) || math.Abs(f) > 1e11 {
		return fmt.Errorf("expected a timestamp (seconds since the epoch), got %s", b)
	}
	sec, frac := math.Modf(f)
	*t = Epoch(time.Unix(int64(sec), int64(frac*1e9)))
	return nil
}
