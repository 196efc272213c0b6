package artifact

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/mce-run/mce/internal/wire"
)

// DefaultMaxDownloadBytes is the default cap on the size of one downloaded
// S3 object: [DefaultMaxExtractedBytes] and an eighth more for the archive's
// own overhead.
const DefaultMaxDownloadBytes = DefaultMaxExtractedBytes + DefaultMaxExtractedBytes/8

// Options configure a [Fetcher]. The zero value is usable: AWS's default
// configuration chain, default limits, and no file:// model data at all.
type Options struct {
	// S3 configures the S3 client used for s3:// URLs.
	S3 S3Options
	// ModelRoots are the folders file:// model data may come from: a path
	// (and every symbolic link met on the way) must resolve inside one of
	// them. "/" and the system folders (/proc, /sys, /dev, /etc, /run,
	// /var/run, /boot, /usr, /bin, /sbin, /lib*), or folders holding them,
	// are refused by [NewFetcher]. Empty means file:// URLs are refused.
	ModelRoots []string
	// NamedData are the absolute paths of file:// data the operator's
	// endpoint files name that did not exist when the fetcher was made
	// (what exists is named in ModelRoots: a folder, or an archive's
	// folder). A path at or under one of them is reported missing
	// ([ErrNotFound]) while it is, not outside the roots, and once it
	// exists its folder becomes a model root, as it would have been had it
	// existed at start (a system folder never does).
	NamedData []string
	// MaxExtractedBytes caps the regular-file bytes of one artifact (an
	// archive's expanded content or a folder's files).
	// Zero means [DefaultMaxExtractedBytes].
	MaxExtractedBytes int64
	// MaxRatio caps an archive's expansion ratio past [RatioFloorBytes].
	// Zero means [DefaultMaxRatio].
	MaxRatio int64
	// MaxEntries caps the entries of one archive. Zero means [DefaultMaxEntries].
	MaxEntries int
	// MaxDownloadBytes caps the size of one S3 object. Zero means
	// [DefaultMaxDownloadBytes].
	MaxDownloadBytes int64
}

// S3Options configure the S3 client. Unset fields come from aws-sdk-go-v2's
// default configuration chain (environment, shared config and credentials
// files, container and instance roles).
type S3Options struct {
	// Endpoint overrides the S3 endpoint, for S3-compatible stores such as
	// MinIO ("http://127.0.0.1:9000"). Empty means AWS.
	Endpoint string
	// Region of the bucket. Empty means the chain's region (AWS_REGION,
	// the profile), and us-east-1 when that is empty too.
	Region string
	// UsePathStyle addresses buckets as endpoint/bucket/key instead of
	// bucket.endpoint/key; most S3-compatible stores need it.
	UsePathStyle bool
	// Credentials replaces the default credential chain when set.
	Credentials aws.CredentialsProvider
	// Concurrency is the number of byte ranges fetched in parallel.
	// Zero means 8.
	Concurrency int
	// PartSizeBytes is the size of one byte range. Zero means 8 MiB.
	PartSizeBytes int64
	// CredentialsTimeout bounds the first lookup of credentials through the
	// default chain, the EC2 instance-metadata service included (which
	// AWS_EC2_METADATA_DISABLED=true switches off). Zero means 2 s.
	CredentialsTimeout time.Duration
	// InstanceMetadataEndpoint replaces the instance-metadata address
	// (http://169.254.169.254, or AWS_EC2_METADATA_SERVICE_ENDPOINT); for
	// tests. Empty means the SDK's choice.
	InstanceMetadataEndpoint string
}

const (
	defaultCredentialsTimeout = 2 * time.Second
	defaultRegion             = "us-east-1"
	defaultConcurrency        = 8
	defaultPartSize           = 8 << 20
	minPartSize               = 64 << 10
)

// Fetcher turns model data URLs into local directories. It is safe for
// concurrent use; the S3 client is built on first use of an s3:// URL, so a
// Fetcher that only sees file:// URLs never reads AWS configuration.
type Fetcher struct {
	opts  Options
	named []string // Options.NamedData, absolute and clean

	mu    sync.Mutex
	s3    *s3Clients
	roots []modelRoot // grows when named data appears (roots.go)
}

// s3Clients are built together, once per Fetcher.
type s3Clients struct {
	api *s3.Client
	tm  *transfermanager.Client
}

// NewFetcher validates opts, fills their defaults and returns a Fetcher.
func NewFetcher(opts Options) (*Fetcher, error) {
	if opts.MaxExtractedBytes < 0 || opts.MaxEntries < 0 || opts.MaxDownloadBytes < 0 || opts.MaxRatio < 0 {
		return nil, errors.New("artifact options: limits must not be negative")
	}
	if opts.S3.Concurrency < 0 {
		return nil, errors.New("artifact options: S3 concurrency must not be negative")
	}
	if opts.S3.PartSizeBytes != 0 && opts.S3.PartSizeBytes < minPartSize {
		return nil, fmt.Errorf("artifact options: S3 part size must be at least %d bytes", minPartSize)
	}
	if e := opts.S3.Endpoint; e != "" {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("artifact options: S3 endpoint %q must be an http:// or https:// URL", e)
		}
	}
	if opts.MaxExtractedBytes == 0 {
		opts.MaxExtractedBytes = DefaultMaxExtractedBytes
	}
	if opts.MaxEntries == 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.MaxRatio == 0 {
		opts.MaxRatio = DefaultMaxRatio
	}
	if opts.MaxDownloadBytes == 0 {
		opts.MaxDownloadBytes = opts.MaxExtractedBytes + opts.MaxExtractedBytes/8
	}
	roots, err := newModelRoots(opts.ModelRoots)
	if err != nil {
		return nil, err
	}
	if opts.S3.Concurrency == 0 {
		opts.S3.Concurrency = defaultConcurrency
	}
	if opts.S3.PartSizeBytes == 0 {
		opts.S3.PartSizeBytes = defaultPartSize
	}
	if opts.S3.CredentialsTimeout <= 0 {
		opts.S3.CredentialsTimeout = defaultCredentialsTimeout
	}
	var named []string
	for _, n := range opts.NamedData {
		if filepath.IsAbs(n) {
			named = append(named, filepath.Clean(n))
		}
	}
	return &Fetcher{opts: opts, roots: roots, named: named}, nil
}

// Prepare makes the model data at modelDataURL available as a local
// directory and returns its absolute path; the directory becomes
// /opt/ml/model (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ContainerDefinition.html,
// https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html).
//
// Accepted URLs:
//   - file:///abs/path, and file://rel/path or file://./rel/path relative to
//     baseDir (the endpoint file's folder; empty means the working
//     directory). Everything after "file://" is a path, taken literally (no
//     host part, no percent-decoding). It must resolve, symbolic links
//     included, inside one of [Options.ModelRoots] ([ErrOutsideModelRoots]
//     otherwise). A folder is staged: its regular files, folders and
//     internal symbolic links are copied into a new directory under
//     workDir, and anything else (sockets, devices, FIFOs, links leading
//     out) is refused. A regular file must be a tar or tar.gz archive and is
//     extracted.
//   - s3://bucket/key: the object is downloaded in parallel byte ranges to a
//     temporary file under workDir, extracted, and the temporary file
//     removed.
//   - s3://bucket/prefix/ (ending in "/"): an uncompressed model folder, as
//     ModelDataSource's S3Prefix with CompressionType None. Every object
//     under the prefix is downloaded to its key relative to the prefix,
//     with the names, counts and sizes checked as an archive's entries.
//     PrepareArchive refuses it (an s3:// object is looked up instead).
//
// Archives are extracted with [Extract] into a new directory under workDir
// (created if missing); the caller owns and removes that directory. On error
// nothing made by this call is left under workDir.
//
// Errors match [ErrUnsupportedURL], [ErrNotFound], [ErrTooLarge],
// [ErrUnsafeArchive], [ErrInvalidArchive], [ErrOutsideModelRoots] or
// [ErrNoCredentials] where they apply, and their messages name the URL,
// e.g. `model data "s3://b/k" not found: …`, but never a host path the
// caller did not write.
func (f *Fetcher) Prepare(ctx context.Context, modelDataURL, baseDir, workDir string) (string, error) {
	return f.prepare(ctx, modelDataURL, baseDir, workDir, true)
}

// PrepareArchive is [Fetcher.Prepare] for artifacts that must be archives,
// as multi-model artifacts are (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html):
// a file:// URL naming a folder is refused with [ErrInvalidArchive].
func (f *Fetcher) PrepareArchive(ctx context.Context, modelDataURL, baseDir, workDir string) (string, error) {
	return f.prepare(ctx, modelDataURL, baseDir, workDir, false)
}

func (f *Fetcher) prepare(ctx context.Context, modelDataURL, baseDir, workDir string, folders bool) (string, error) {
	if why := wire.S3KeyRefused(modelDataURL); why != "" {
		return "", unsupportedURL(modelDataURL, why)
	}
	ctx = withSource(ctx, modelDataURL)
	var (
		dir string
		err error
	)
	switch {
	case strings.HasPrefix(modelDataURL, "file://"):
		dir, err = f.prepareFile(ctx, modelDataURL, baseDir, workDir, folders)
	case strings.HasPrefix(modelDataURL, "s3://") && strings.HasSuffix(modelDataURL, "/") && folders:
		dir, err = f.prepareS3Prefix(ctx, modelDataURL, workDir)
	case strings.HasPrefix(modelDataURL, "s3://"):
		dir, err = f.prepareS3(ctx, modelDataURL, workDir)
	default:
		return "", unsupportedURL(modelDataURL, "the scheme is not supported")
	}
	if err != nil {
		return "", describe(modelDataURL, err)
	}
	return dir, nil
}

// describe puts the URL in front of err, in the form users read.
func describe(modelDataURL string, err error) error {
	switch {
	case errors.Is(err, ErrUnsupportedURL), errors.Is(err, ErrOutsideModelRoots):
		return err
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("model data %q %w", modelDataURL, err)
	default:
		return fmt.Errorf("model data %q: %w", modelDataURL, err)
	}
}

func unsupportedURL(modelDataURL, why string) error {
	return fmt.Errorf("%w %q: %s; use s3://bucket/key, file:///absolute/path or file://path/relative/to/the/endpoint/file",
		ErrUnsupportedURL, modelDataURL, why)
}

func (f *Fetcher) limits(sourceBytes int64) Limits {
	return Limits{MaxBytes: f.opts.MaxExtractedBytes, MaxEntries: f.opts.MaxEntries,
		MaxRatio: f.opts.MaxRatio, SourceBytes: sourceBytes}
}

func (f *Fetcher) prepareFile(ctx context.Context, modelDataURL, baseDir, workDir string, folders bool) (string, error) {
	p := strings.TrimPrefix(modelDataURL, "file://")
	if p == "" {
		return "", unsupportedURL(modelDataURL, "the path is empty")
	}
	if !filepath.IsAbs(p) {
		if baseDir == "" {
			baseDir, _ = os.Getwd()
		}
		p = filepath.Join(baseDir, p)
	}
	mr, rel, err := f.locate(modelDataURL, p)
	if err != nil {
		return "", err
	}
	root, err := os.OpenRoot(mr.real)
	if err != nil {
		return "", fmt.Errorf("opening its model root: %w", WithoutPath(err))
	}
	defer root.Close()
	// Through root, links are followed only while they stay inside it, so
	// a folder swapped for a link after locate cannot lead out.
	fi, err := root.Stat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return "", fileNotFound(modelDataURL)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return "", fmt.Errorf("%w: no file or folder can have that name, which is too long", ErrNotFound)
	case err != nil:
		// A link leading out of the root (os.Root refuses to follow it), or
		// a path that cannot be read: either way nothing to serve.
		return "", outsideRoots(modelDataURL)
	case fi.IsDir() && !folders:
		return "", fmt.Errorf("%w: it is a folder, and this model data must be a tar or tar.gz archive", ErrInvalidArchive)
	case fi.IsDir():
		sub, err := root.OpenRoot(rel)
		if err != nil {
			return "", fmt.Errorf("opening the folder: %w", WithoutPath(err))
		}
		defer sub.Close()
		return f.extractInto(ctx, workDir, func(dest string) error {
			return stage(ctx, sub, dest, f.limits(0))
		})
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%w: it is neither a folder nor a regular file", ErrUnsafeArchive)
	}
	// O_NONBLOCK: should the file be swapped for a FIFO, the open does not
	// hang; the type is checked again on the open file.
	src, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("opening the archive: %w", WithoutPath(err))
	}
	defer src.Close()
	if fi, err = src.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: it is neither a folder nor a regular file", ErrUnsafeArchive)
	}
	return f.extractInto(ctx, workDir, func(dest string) error {
		return Extract(ctx, src, dest, f.limits(fi.Size()))
	})
}

// extractInto runs extract on a fresh directory under workDir, removing it
// when extract fails.
func (f *Fetcher) extractInto(ctx context.Context, workDir string, extract func(dest string) error) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	dest, err := newWorkDir(workDir)
	if err != nil {
		return "", err
	}
	if err := extract(dest); err != nil {
		if rerr := os.RemoveAll(dest); rerr != nil {
			return "", errors.Join(err, fmt.Errorf("removing the partial extraction: %w", WithoutPath(rerr)))
		}
		return "", err
	}
	return dest, nil
}

// newWorkDir makes a fresh directory under workDir that every user can
// read and traverse, as containers run as any user.
func newWorkDir(workDir string) (string, error) {
	workDir, err := ensureWorkDir(workDir)
	if err != nil {
		return "", err
	}
	dest, err := os.MkdirTemp(workDir, "model-")
	if err != nil {
		return "", fmt.Errorf("creating the extraction directory: %w", WithoutPath(err))
	}
	if err := os.Chmod(dest, 0o755); err != nil {
		return "", errors.Join(fmt.Errorf("creating the extraction directory: %w", WithoutPath(err)), os.Remove(dest))
	}
	return dest, nil
}

// ensureWorkDir returns workDir as an absolute path, creating it if missing.
func ensureWorkDir(workDir string) (string, error) {
	if workDir == "" {
		return "", errors.New("no work directory given")
	}
	abs, err := filepath.Abs(workDir)
	if err != nil {
		return "", fmt.Errorf("resolving the work directory: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("creating the work directory: %w", WithoutPath(err))
	}
	return abs, nil
}
