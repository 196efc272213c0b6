package artifact

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// prepareS3Prefix stages an uncompressed model folder: every object under
// an s3://bucket/prefix/ URL (SageMaker's ModelDataSource with S3DataType
// S3Prefix and CompressionType None) becomes a file at its key relative to
// the prefix. The rules of archives hold: names are checked as entry names
// (no "..", no absolute or odd paths), the sum of the objects' sizes is
// bounded by MaxDownloadBytes and MaxExtractedBytes, their number by
// MaxEntries, and files are written through an os.Root. Keys ending in "/"
// (folder markers of consoles) are skipped.
func (f *Fetcher) prepareS3Prefix(ctx context.Context, modelDataURL, workDir string) (string, error) {
	bucket, prefix, err := parseS3URL(modelDataURL)
	if err != nil {
		return "", err
	}
	c, err := f.clients(ctx)
	if err != nil {
		return "", err
	}
	type object struct {
		key  string
		size int64
	}
	var objects []object
	var total int64
	lim := f.limits(0).withDefaults()
	p := s3.NewListObjectsV2Paginator(c.api, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return "", classifyS3(err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if strings.HasSuffix(key, "/") {
				continue
			}
			objects = append(objects, object{key, aws.ToInt64(o.Size)})
			total += aws.ToInt64(o.Size)
			if len(objects) > lim.MaxEntries {
				return "", &LimitError{What: "number of files and folders", Limit: int64(lim.MaxEntries), Unit: "entries"}
			}
			if total > f.opts.MaxDownloadBytes {
				return "", &LimitError{What: "S3 object size", Limit: f.opts.MaxDownloadBytes, Unit: "bytes"}
			}
		}
	}
	if len(objects) == 0 {
		return "", fmt.Errorf("%w: no object under that prefix", ErrNotFound)
	}
	workDir, err = ensureWorkDir(workDir)
	if err != nil {
		return "", err
	}
	return f.extractInto(ctx, workDir, func(dest string) error {
		root, err := os.OpenRoot(dest)
		if err != nil {
			return fmt.Errorf("opening the staging directory: %w", WithoutPath(err))
		}
		defer root.Close()
		x := newExtractor(ctx, root, lim)
		x.prog = newProgress(ctx, "download", modelDataURL, total)
		for _, o := range objects {
			name, reason := cleanName(strings.TrimPrefix(o.key, prefix))
			if reason != "" {
				return unsafeEntry(o.key, "%s", reason)
			}
			if name == "" {
				continue
			}
			if err := x.ensureDir(o.key, path.Dir(name)); err != nil {
				return err
			}
			if o.size > x.byteCap-x.written {
				return x.capErr
			}
			if err := x.s3Object(c.api, bucket, o.key, name); err != nil {
				return err
			}
		}
		x.prog.done()
		return nil
	})
}

// s3Object downloads one object to name, with the copy's limits.
func (x *extractor) s3Object(api *s3.Client, bucket, key, name string) error {
	out, err := api.GetObject(x.ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return classifyS3(err)
	}
	defer out.Body.Close()
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return unsafeEntry(key, "another object already gave this file")
	}
	if err != nil {
		return fmt.Errorf("staging %q: %w", name, WithoutPath(err))
	}
	defer f.Close()
	if err := x.root.Chmod(name, 0o644); err != nil {
		return fmt.Errorf("staging %q: %w", name, WithoutPath(err))
	}
	if _, err := x.copy(f, out.Body); err != nil {
		return err
	}
	return f.Close()
}
