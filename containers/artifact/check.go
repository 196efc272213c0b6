package artifact

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/mce-run/mce/internal/wire"
)

// Check reports, without downloading or extracting anything, whether the
// model data at modelDataURL can be reached: a file:// path exists inside
// the model roots (a folder or a regular file; a folder when multiModel is
// set), an s3:// object answers HEAD, an s3:// folder of an uncompressed
// model (a URL ending in "/") holds at least one object, and a multi-model
// s3:// prefix can be listed (it may be empty: models may be uploaded
// after the endpoint is created, as in SageMaker). S3 credentials are
// looked up first, so a missing one is reported as [ErrNoCredentials]
// without any S3 request. The caller bounds the time through ctx.
//
// Errors match the same sentinels as [Fetcher.Prepare]'s and name only the
// URL, never a host path the caller did not write.
func (f *Fetcher) Check(ctx context.Context, modelDataURL, baseDir string, multiModel bool) error {
	if why := wire.S3KeyRefused(modelDataURL); why != "" {
		return unsupportedURL(modelDataURL, why)
	}
	var err error
	switch {
	case strings.HasPrefix(modelDataURL, "file://"):
		err = f.checkFile(modelDataURL, baseDir, multiModel)
	case strings.HasPrefix(modelDataURL, "s3://"):
		err = f.checkS3(ctx, modelDataURL, multiModel)
	default:
		return unsupportedURL(modelDataURL, "the scheme is not supported")
	}
	if err != nil {
		return describe(modelDataURL, err)
	}
	return nil
}

func (f *Fetcher) checkFile(modelDataURL, baseDir string, folderOnly bool) error {
	p := strings.TrimPrefix(modelDataURL, "file://")
	if p == "" {
		return unsupportedURL(modelDataURL, "the path is empty")
	}
	if !filepath.IsAbs(p) {
		if baseDir == "" {
			baseDir, _ = os.Getwd()
		}
		p = filepath.Join(baseDir, p)
	}
	mr, rel, err := f.locate(modelDataURL, p)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(mr.real)
	if err != nil {
		return fmt.Errorf("opening its model root: %w", WithoutPath(err))
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ENAMETOOLONG):
		return fileNotFound(modelDataURL)
	case err != nil:
		return outsideRoots(modelDataURL)
	case folderOnly && !fi.IsDir():
		return fmt.Errorf("%w: it is a file, and a multi-model prefix must be a folder holding the models' archives", ErrUnsupportedURL)
	case !fi.IsDir() && !fi.Mode().IsRegular():
		return fmt.Errorf("%w: it is neither a folder nor a regular file", ErrUnsafeArchive)
	}
	return nil
}

func (f *Fetcher) checkS3(ctx context.Context, modelDataURL string, multiModel bool) error {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(modelDataURL, "s3://"), "/")
	folder := strings.HasSuffix(modelDataURL, "/")
	if bucket == "" || (key == "" && !multiModel && !folder) {
		return unsupportedURL(modelDataURL, "an s3:// URL needs a bucket and an object key")
	}
	c, err := f.clients(ctx)
	if err != nil {
		return err
	}
	if !multiModel && !folder {
		if _, err := c.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
			return classifyS3(err)
		}
		return nil
	}
	out, err := c.api.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(key), MaxKeys: aws.Int32(1)})
	if err != nil {
		return classifyS3(err)
	}
	if len(out.Contents) == 0 && !multiModel {
		return fmt.Errorf("%w: no object under that prefix", ErrNotFound)
	}
	return nil
}
