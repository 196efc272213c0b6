package spec

import (
	"strconv"
	"strings"

	"github.com/mce-run/mce/internal/wire"
)

// SubmitDirEnv is the Environment key of a framework container's code
// folder or archive; an s3:// value is read by mce (containers.SubmitDirEnv).
const SubmitDirEnv = "SAGEMAKER_SUBMIT_DIRECTORY"

// S3KeyProblem is the refusal of an s3:// location whose key mce neither
// reads nor writes (wire.S3KeyRefused), "" for any other; what names the
// member, e.g. `The model data of container "a"`.
func S3KeyProblem(what, url string) string {
	url = strings.TrimSpace(url)
	if why := wire.S3KeyRefused(url); why != "" {
		return what + " " + strconv.Quote(url) + " is refused: " + why +
			". S3 takes such keys literally, but S3-compatible stores that keep objects as files resolve them to another object; name the object itself."
	}
	return ""
}

func checkS3Key(s *semantic, what, url string) {
	if msg := S3KeyProblem(what, url); msg != "" {
		s.add(msg)
	}
}
