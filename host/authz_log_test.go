package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
)

// TestUnsignedFloodLogBounded replays issue 26's log flood with the real
// SDK: unsigned AddTags calls of 20,000 tags (an 859 KiB body each) are
// refused with 403, and each was logged with its whole context (~937 KiB
// of log a request, 18 MiB in 9 s from one client). The first call's
// decision line is now bounded, and a burst of such calls writes a bounded
// number of lines.
func TestUnsignedFloodLogBounded(t *testing.T) {
	cf := filepath.Join(t.TempDir(), "creds.yaml")
	if err := os.WriteFile(cf, []byte(`
Credentials:
  - {AccessKeyId: AKIAADMIN0000EXAMPLE, SecretAccessKey: admin-secret, Arn: "arn:aws:iam::123456789012:user/admin",
     Policies: [{Statement: {Effect: Allow, Action: "*", Resource: "*"}}]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	a, err := authz.Load(context.Background(), authz.Config{CredentialsFile: cf, Region: "us-east-1", Logger: zerolog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Authz: a})
	tags := make([]smtypes.Tag, 20_000)
	for i := range tags {
		tags[i] = smtypes.Tag{Key: aws.String(fmt.Sprintf("key-%05d", i)), Value: aws.String(strings.Repeat("v", 16))}
	}
	const calls = 12
	for i := range calls {
		_, err := h.sm().AddTags(context.Background(), &sagemaker.AddTagsInput{
			ResourceArn: aws.String("arn:aws:sagemaker:us-east-1:123456789012:endpoint/victim"), Tags: tags})
		if code, _ := apiCode(t, err); code != "AccessDeniedException" {
			t.Fatalf("call %d: %v, want AccessDeniedException", i, err)
		}
		if i == 0 {
			n := len(logs.String())
			t.Logf("the first refused call wrote %d bytes of log", n)
			if n == 0 || n > 16<<10 {
				t.Fatalf("the first refused call wrote %d bytes of log, want a line of at most 16 KiB", n)
			}
		}
	}
	if n := strings.Count(logs.String(), "\n"); n > 6 { // the policies' load line and 5 denials
		t.Errorf("%d refused calls of one client wrote %d log lines, want at most 6", calls, n)
	}
	if n := len(logs.String()); n > 6*(16<<10) {
		t.Errorf("%d refused calls of one client wrote %d bytes of log", calls, n)
	}
}
