package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mce-run/mce/containers/artifact"
)

// fetchFlags are `mce fetch`'s flags.
type fetchFlags struct {
	url, dest string
	timeout   time.Duration
	fetcher   fetcherFlags
}

// fetcherFlags configure the artifact fetcher of the commands the
// kubernetes engine runs inside pods (fetch, agent): the same sources and
// safety limits as `mce serve`, which passes its own values on.
type fetcherFlags struct {
	modelRoots         []string
	s3Endpoint         string
	s3PathStyle        bool
	maxBytes, maxRatio int64
}

func (f *fetcherFlags) register(fl *pflag.FlagSet) {
	fl.StringArrayVar(&f.modelRoots, "model-root", nil, "folder that file:// model data may come from; repeatable")
	fl.StringVar(&f.s3Endpoint, "s3-endpoint", "", "endpoint URL of an S3-compatible store")
	fl.BoolVar(&f.s3PathStyle, "s3-path-style", false, "use path-style S3 addressing")
	fl.Int64Var(&f.maxBytes, "max-artifact-bytes", artifact.DefaultMaxExtractedBytes, "the most bytes of files one artifact may extract")
	fl.Int64Var(&f.maxRatio, "max-artifact-ratio", artifact.DefaultMaxRatio, "the most an archive may expand, as a multiple of its own size, past its first 64 MiB")
}

// new makes the fetcher; a bad value is a usage error (exit status 2).
func (f *fetcherFlags) new() (*artifact.Fetcher, error) {
	if f.maxBytes < 0 || f.maxRatio < 0 {
		return nil, &exitError{code: 2, msg: "--max-artifact-bytes and --max-artifact-ratio must not be negative"}
	}
	fetcher, err := artifact.NewFetcher(artifact.Options{
		S3:                artifact.S3Options{Endpoint: f.s3Endpoint, UsePathStyle: f.s3PathStyle},
		ModelRoots:        f.modelRoots,
		MaxExtractedBytes: f.maxBytes,
		MaxRatio:          f.maxRatio,
	})
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	return fetcher, nil
}

// newFetchCmd is what the kubernetes engine's init container runs: the
// model data of one container, fetched with the same fetcher and limits as
// `mce serve`, written into a folder the model container mounts at
// /opt/ml/model.
func newFetchCmd() *cobra.Command {
	var f fetchFlags
	cmd := &cobra.Command{
		Use:   "fetch --url URL --dest DIR",
		Short: "Fetch and extract one ModelDataUrl into a folder (the kubernetes engine's init container)",
		Long: `fetch writes the model data at --url (s3://bucket/key.tar.gz, s3://bucket/prefix/, or a
file:// path inside a --model-root) into --dest, with the same safety limits as serve:
archives are checked entry by entry, and their size and expansion are capped. It is what
the init container of every pod of the kubernetes engine runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fetch(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "ModelDataUrl: s3:// or file://")
	fl.StringVar(&f.dest, "dest", "", "folder to write the model data into (created if missing; what it holds is kept)")
	fl.DurationVar(&f.timeout, "timeout", 0, "give up when fetching and extracting take longer (ModelDataDownloadTimeoutInSeconds); 0: no bound")
	f.fetcher.register(fl)
	_ = cmd.MarkFlagRequired("url")
	_ = cmd.MarkFlagRequired("dest")
	return cmd
}

func fetch(cmd *cobra.Command, f fetchFlags) error {
	fetcher, err := f.fetcher.new()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.dest, 0o755); err != nil {
		return err
	}
	// The work folder is inside dest, so the extracted entries move into
	// place by rename (one file system), and a failure leaves nothing.
	work, err := os.MkdirTemp(f.dest, ".mce-fetch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	ctx := cmd.Context()
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	dir, err := fetcher.Prepare(ctx, f.url, "", work)
	if err != nil {
		if f.timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("model data not fetched within ModelDataDownloadTimeoutInSeconds (%s): %w", f.timeout, err)
		}
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		to := filepath.Join(f.dest, e.Name())
		if _, err := os.Lstat(to); err == nil {
			return fmt.Errorf("model data entry %q exists in %s already", e.Name(), f.dest)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), to); err != nil {
			return err
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "fetched %s: %d entries into %s\n", f.url, len(entries), f.dest)
	return nil
}
