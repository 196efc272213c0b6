// Package gpucheck drives the toolkit's multi-model server
// (examples/containers/framework/mce_serving), run as a plain Python
// process, through mce's real multi-model Manager (containers/mme) and the
// real NVML inventory (containers/gpu), with generated models whose weights
// are one tensor of a chosen size: the GPU check for a machine with a GPU
// and PyTorch but without Docker (scripts/gpu-check.sh). It reports what a
// GPU multi-model endpoint does under a skewed load: residency, evictions,
// hits and misses, failed calls, what unloading gives back, the status a
// load that runs out of GPU memory gets, and the Manager's overhead on a
// warm call.
//
// It owns only its work folder and the server process it starts (killed
// when Run returns); it talks only to that process, on 127.0.0.1. A dry run
// (tiny models on the CPU, no NVML needed) proves the same path end to end
// on a machine without a GPU.
package gpucheck
