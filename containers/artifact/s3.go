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

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// parseS3URL splits s3://bucket/key. The key is everything after the first
// slash, taken literally (S3 keys may hold any character).
func parseS3URL(modelDataURL string) (bucket, key string, err error) {
	bucket, key, _ = strings.Cut(strings.TrimPrefix(modelDataURL, "s3://"), "/")
	if bucket == "" || key == "" {
		return "", "", unsupportedURL(modelDataURL, "an s3:// URL needs a bucket and an object key")
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
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
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
		w := &boundedWriterAt{f: tmp, size: size}
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
	}
	return f.extractInto(ctx, workDir, func(dest string) error {
		return Extract(ctx, io.NewSectionReader(tmp, 0, size), dest, f.limits())
	})
}

// classifyS3 marks missing keys and buckets as ErrNotFound.
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
		return fmt.Errorf("downloading: %w", err)
	}
	return fmt.Errorf("%w: %w", ErrNotFound, err)
}

// boundedWriterAt writes the parallel ranges into the download file,
// refusing bytes past the size HEAD reported, and records how far the
// written data reaches.
type boundedWriterAt struct {
	f    *os.File
	size int64

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
