// Command gen writes the generated multi-model artifacts model-000.tar.gz … and manifest.json (see
// scripts/mme-models.sh and ../README.md). The output is deterministic: the same flags give the same bytes.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mce-run/mce/examples/containers/internal/modelserver"
)

func main() {
	out := flag.String("out", "build/mme-models", "output directory")
	n := flag.Int("n", 200, "number of models")
	mem := flag.Int64("memory-bytes", 10<<20, "memory_bytes declared by every model (0: the bytes of its weights)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "gen: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	man, err := modelserver.WriteArtifacts(*out, *n, *mem)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gen: %v\n", err)
		os.Exit(1)
	}
	total := 0
	for _, m := range man.Models {
		total += m.Bytes
	}
	fmt.Printf("%s: %d models (%s … %s, %d bytes in all, memory_bytes %d each) and manifest.json\n",
		*out, man.Count, man.Models[0].TargetModel, man.Models[len(man.Models)-1].TargetModel, total, *mem)
}
