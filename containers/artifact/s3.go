package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/mce-run/mce/internal/wire"
)

// parseS3URL splits s3://bucket/key. The key is everything after the first
// slash, taken literally (S3 keys may hold any character).
func parseS3URL(modelDataURL string) (bucket, key string, err error) {
	bucket, key, _ = strings.Cut(strings.TrimPrefix(modelDataURL, "s3://"), "/")
	if bucket == "" || key == "" {
		return "", "", unsupportedURL(modelDataURL, "an s3:// URL needs a bucket and an object key")
	}
	if why := wire.S3KeyRefused(modelDataURL); why != "" {
		return "", "", unsupportedURL(modelDataURL, why)
	}
	return bucket, key, nil
}

// clients builds the S3 clients on first use.
func (f *Fetcher) clients(ctx context.Context) (*s3Clients, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.s3 != nil {
		return f.s3, nil
	}
	o := f.opts.S3
	var load []func(*config.LoadOptions) error
	if o.Region != "" {
		load = append(load, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		load = append(load, config.WithCredentialsProvider(o.Credentials))
	} else {
		// The instance role stays reachable for users on EC2, but one
		// short try, without the SDK's retries; imds.New still honours
		// AWS_EC2_METADATA_DISABLED and AWS_EC2_METADATA_SERVICE_ENDPOINT.
		load = append(load, config.WithEC2RoleCredentialOptions(func(ro *ec2rolecreds.Options) {
			ro.Client = imds.New(imds.Options{
				Endpoint:   o.InstanceMetadataEndpoint,
				HTTPClient: &http.Client{Timeout: o.CredentialsTimeout},
				Retryer:    aws.NopRetryer{},
			})
		}))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %s", sdkMessage(err))
	}
	if o.Credentials == nil {
		// Fail fast and clearly here rather than with the chain's raw
		// error on the first request.
		cctx, cancel := context.WithTimeout(ctx, o.CredentialsTimeout)
		_, err := cfg.Credentials.Retrieve(cctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, noCredentials(o.CredentialsTimeout)
		}
	}
	if cfg.Region == "" {
		cfg.Region = defaultRegion
	}
	api := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.UsePathStyle
		// Ranged GETs carry no whole-object checksum; do not log about it.
		so.DisableLogOutputChecksumValidationSkipped = true
	})
	tm := transfermanager.New(api, func(to *transfermanager.Options) {
		to.GetObjectType = tmtypes.GetObjectRanges
		to.Concurrency = o.Concurrency
		to.PartSizeBytes = o.PartSizeBytes
	})
	f.s3 = &s3Clients{api: api, tm: tm}
	return f.s3, nil
}

// noCredentials says where the default chain looked, without its raw text.
func noCredentials(timeout time.Duration) error {
	return fmt.Errorf("%w for s3:// model data: mce looked in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, "+
		"or AWS_PROFILE), the shared files ~/.aws/credentials and ~/.aws/config (or AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE), "+
		"container credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI), web identity (AWS_WEB_IDENTITY_TOKEN_FILE), "+
		"and the EC2 instance role (for at most %s; AWS_EC2_METADATA_DISABLED=true skips it). "+
		"For an S3-compatible store (MinIO, versitygw) start mce with --s3-endpoint and give its access keys the same way",
		ErrNoCredentials, timeout)
}

func (f *Fetcher) prepareS3(ctx context.Context, modelDataURL, workDir string) (string, error) {
	bucket, key, err := parseS3URL(modelDataURL)
	if err != nil {
		return "", err
	}
	c, err := f.clients(ctx)
	if err != nil {
		return "", err
	}
	head, err := c.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return "", classifyS3(err)
	}
	size := aws.ToInt64(head.ContentLength)
	if size > f.opts.MaxDownloadBytes {
		return "", &LimitError{What: "S3 object size", Limit: f.opts.MaxDownloadBytes, Unit: "bytes"}
	}
	workDir, err = ensureWorkDir(workDir)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(workDir, ".download-*")
	if err != nil {
		return "", fmt.Errorf("creating the download file: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	if size > 0 {
		w := &boundedWriterAt{f: tmp, size: size, prog: newProgress(ctx, "download", modelDataURL, size)}
		_, err := c.tm.DownloadObject(ctx, &transfermanager.DownloadObjectInput{
			Bucket:   aws.String(bucket),
			Key:      aws.String(key),
			WriterAt: w,
			// Every range comes from the version HEAD saw.
			IfMatch: head.ETag,
		})
		if err != nil {
			if w.overflowed() {
				return "", errors.New("the object grew while it was downloaded")
			}
			return "", classifyS3(err)
		}
		if got := w.end(); got != size {
			return "", fmt.Errorf("download incomplete: got %d of %d bytes", got, size)
		}
		w.prog.done()
	}
	return f.extractInto(ctx, workDir, func(dest string) error {
		return Extract(ctx, io.NewSectionReader(tmp, 0, size), dest, f.limits(size))
	})
}

// s3Error carries an SDK error under a message of our own: the SDK's text
// (operation names, request IDs, retry counts) is not meant for callers.
type s3Error struct {
	msg string
	err error
}

func (e *s3Error) Error() string { return e.msg }
func (e *s3Error) Unwrap() error { return e.err }

// sdkMessage is the part of an SDK error a caller can use: the service's
// code and message, the HTTP status, or the innermost cause.
func sdkMessage(err error) string {
	var (
		apiErr  smithy.APIError
		respErr *awshttp.ResponseError
	)
	switch {
	case errors.As(err, &apiErr):
		if m := apiErr.ErrorMessage(); m != "" && m != apiErr.ErrorCode() {
			return apiErr.ErrorCode() + ": " + m
		}
		return apiErr.ErrorCode()
	case errors.As(err, &respErr):
		return fmt.Sprintf("HTTP status %d", respErr.HTTPStatusCode())
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// classifyS3 marks missing keys and buckets as ErrNotFound, and replaces
// the SDK's text with sdkMessage's.
func classifyS3(err error) error {
	var (
		noKey    *s3types.NoSuchKey
		noBucket *s3types.NoSuchBucket
		notFound *s3types.NotFound
		apiErr   smithy.APIError
		respErr  *awshttp.ResponseError
	)
	switch {
	case errors.As(err, &noKey), errors.As(err, &noBucket), errors.As(err, &notFound):
	case errors.As(err, &apiErr) && (apiErr.ErrorCode() == "NoSuchKey" || apiErr.ErrorCode() == "NoSuchBucket"):
	case errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusNotFound:
	default:
		return &s3Error{msg: "downloading from S3: " + sdkMessage(err), err: err}
	}
	return fmt.Errorf("%w: %w", ErrNotFound, &s3Error{msg: sdkMessage(err), err: err})
}

// boundedWriterAt writes the parallel ranges into the download file,
// refusing bytes past the size HEAD reported, and records how far the
// written data reaches.
type boundedWriterAt struct {
	f    *os.File
	size int64
	prog *progress

	mu   sync.Mutex
	max  int64
	over bool
}

func (w *boundedWriterAt) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || int64(len(p)) > w.size-off {
		w.mu.Lock()
		w.over = true
		w.mu.Unlock()
		return 0, fmt.Errorf("write of %d bytes at %d passes the object size %d", len(p), off, w.size)
	}
	n, err := w.f.WriteAt(p, off)
	w.prog.add(int64(n), 0)
	w.mu.Lock()
	w.max = max(w.max, off+int64(n))
	w.mu.Unlock()
	return n, err
}

func (w *boundedWriterAt) end() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.max
}

func (w *boundedWriterAt) overflowed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.over
}
