// Command train builds the example ticket classifier's two model artifacts from a labelled data set:
// vocab.txt for the featurizer container and model.json for the classifier container.
//
// Usage:
//
//	train [-data examples/models/tickets] [-out build/models/trained] [-epochs 4000]
//
// It reads DATA/train.tsv (and DATA/test.tsv, if present, to report held-out accuracy), and writes
// OUT/featurizer/vocab.txt and OUT/classifier/model.json. The output depends only on the data and the
// flags: two runs give byte-identical files.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mce-run/mce/examples/containers/internal/classifier"
	"github.com/mce-run/mce/examples/containers/internal/featurizer"
	"github.com/mce-run/mce/examples/containers/internal/logreg"
	"github.com/mce-run/mce/examples/containers/internal/textfeat"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "train: %v\n", err)
		os.Exit(1)
	}
}

// report is what one training run measured.
type report struct {
	Examples, Features     int
	Labels                 []string
	TrainCorrect, TestSize int
	TestCorrect            int
	// Misses lists the held-out examples labelled wrongly, as "want → got: text".
	Misses []string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("train", flag.ContinueOnError)
	fl.SetOutput(stderr)
	data := fl.String("data", "examples/models/tickets", "directory with train.tsv and optional test.tsv")
	out := fl.String("out", "build/models/trained", "output directory (gets featurizer/ and classifier/)")
	epochs := fl.Int("epochs", 4000, "gradient-descent steps")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	rep, err := train(ctx, *data, *out, logreg.TrainOptions{Epochs: *epochs})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "trained on %d examples: %d features, labels %s; training accuracy %d/%d",
		rep.Examples, rep.Features, strings.Join(rep.Labels, ", "), rep.TrainCorrect, rep.Examples)
	if rep.TestSize > 0 {
		fmt.Fprintf(stdout, ", held-out accuracy %d/%d", rep.TestCorrect, rep.TestSize)
	}
	fmt.Fprintln(stdout)
	for _, m := range rep.Misses {
		fmt.Fprintf(stderr, "train: held-out miss: %s\n", m)
	}
	return nil
}

// train fits the vocabulary and the model and writes both artifacts under outDir.
func train(ctx context.Context, dataDir, outDir string, opts logreg.TrainOptions) (report, error) {
	examples, err := loadExamples(filepath.Join(dataDir, "train.tsv"))
	if err != nil {
		return report{}, err
	}
	var test []example
	test, err = loadExamples(filepath.Join(dataDir, "test.tsv"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return report{}, err
	}

	docs := make([]string, len(examples))
	var labels []string
	for i, ex := range examples {
		docs[i] = ex.Text
		if !slices.Contains(labels, ex.Label) {
			labels = append(labels, ex.Label)
		}
	}
	slices.Sort(labels)
	vocab, err := textfeat.BuildVocabulary(docs, 1)
	if err != nil {
		return report{}, err
	}
	x := make([][]float64, len(examples))
	y := make([]int, len(examples))
	for i, ex := range examples {
		x[i] = vocab.Vectorize(ex.Text, nil)
		y[i] = slices.Index(labels, ex.Label)
	}
	if err := ctx.Err(); err != nil {
		return report{}, err
	}
	model, err := logreg.Train(x, y, labels, opts)
	if err != nil {
		return report{}, err
	}

	rep := report{Examples: len(examples), Features: vocab.Len(), Labels: labels, TestSize: len(test)}
	for i := range x {
		if got, _ := model.Predict(x[i], nil); got == y[i] {
			rep.TrainCorrect++
		}
	}
	for _, ex := range test {
		got, _ := model.Predict(vocab.Vectorize(ex.Text, nil), nil)
		if model.Labels[got] == ex.Label {
			rep.TestCorrect++
			continue
		}
		rep.Misses = append(rep.Misses, fmt.Sprintf("%s → %s: %s", ex.Label, model.Labels[got], ex.Text))
	}

	if err := writeFile(filepath.Join(outDir, "featurizer", featurizer.VocabFile), vocab.WriteTo); err != nil {
		return report{}, err
	}
	err = writeFile(filepath.Join(outDir, "classifier", classifier.ModelFile), func(w io.Writer) (int64, error) {
		return 0, model.Encode(w)
	})
	return rep, err
}

// writeFile creates path (and its directory) with the content write produces.
func writeFile(path string, write func(io.Writer) (int64, error)) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
