package docker

import "testing"

func TestGPUWords(t *testing.T) {
	for in, want := range map[string]string{"1": "1 GPU", "4": "4 GPUs", "all": "all GPUs", "device=0,1": "GPUs 0,1"} {
		if got := gpuWords(in); got != want {
			t.Errorf("gpuWords(%q) = %q, want %q", in, got, want)
		}
	}
}
