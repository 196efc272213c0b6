package testenv

import (
	"testing"

	"github.com/mce-run/mce/internal/s3test"
)

// S3 is a real S3-compatible server (versitygw, POSIX backend) on loopback:
// Endpoint, AccessKey, SecretKey, Region; Client, Bucket, Put, Get.
type S3 = s3test.Server

// S3Server starts versitygw on 127.0.0.1 with a temporary folder and random
// root keys, waits until it answers, and stops it at cleanup. It fails when
// CI is set and versitygw is missing (scripts/deps.sh installs it), and
// skips otherwise.
func S3Server(tb testing.TB) *S3 {
	tb.Helper()
	return s3test.Start(tb)
}
