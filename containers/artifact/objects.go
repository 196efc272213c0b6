package artifact

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Object access for asynchronous inference: the same client, endpoint and
// credentials as s3:// model data (Options.S3), so one --s3-endpoint serves
// both.

// object splits s3://bucket/key and returns the S3 clients to reach it.
func (f *Fetcher) object(ctx context.Context, url string) (c *s3Clients, bucket, key *string, err error) {
	b, k, err := parseS3URL(url)
	if err != nil {
		return nil, nil, nil, err
	}
	if c, err = f.clients(ctx); err != nil {
		return nil, nil, nil, err
	}
	return c, aws.String(b), aws.String(k), nil
}

// ObjectInfo is what S3 says of an object it serves.
type ObjectInfo struct {
	// Size is the object's ContentLength, -1 when S3 gives none.
	Size int64
	// ContentType is the Content-Type the object was stored with, "" when
	// none.
	ContentType string
}

// OpenObject opens s3://bucket/key for reading. A missing bucket or key is
// an error wrapping ErrNotFound. The caller closes body.
func (f *Fetcher) OpenObject(ctx context.Context, url string) (body io.ReadCloser, info ObjectInfo, err error) {
	info.Size = -1
	c, bucket, key, err := f.object(ctx, url)
	if err != nil {
		return nil, info, err
	}
	out, err := c.api.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: key})
	if err != nil {
		return nil, info, classifyS3(err)
	}
	if out.ContentLength != nil {
		info.Size = *out.ContentLength
	}
	info.ContentType = aws.ToString(out.ContentType)
	return out.Body, info, nil
}

// PutObject writes body to s3://bucket/key with the content type and user
// metadata given (either may be empty), replacing any object there.
func (f *Fetcher) PutObject(ctx context.Context, url string, body []byte, contentType string, meta map[string]string) error {
	c, bucket, key, err := f.object(ctx, url)
	if err != nil {
		return err
	}
	in := &s3.PutObjectInput{Bucket: bucket, Key: key, Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))), Metadata: meta}
	if contentType != "" {
		in.ContentType = aws.String(contentType)
	}
	if _, err := c.api.PutObject(ctx, in); err != nil {
		return &s3Error{msg: fmt.Sprintf("uploading to S3: %s", sdkMessage(err)), err: err}
	}
	return nil
}

// ObjectMetadata is the user metadata of s3://bucket/key (keys lower-case,
// without the x-amz-meta- prefix); an error wrapping ErrNotFound when there
// is no such object.
func (f *Fetcher) ObjectMetadata(ctx context.Context, url string) (map[string]string, error) {
	c, bucket, key, err := f.object(ctx, url)
	if err != nil {
		return nil, err
	}
	out, err := c.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: key})
	if err != nil {
		return nil, classifyS3(err)
	}
	return out.Metadata, nil
}
