package gpu

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ProcessOwner tells whether the process pid (as NVML numbers it: the host's
// PID namespace) belongs to a container; known is false when it cannot tell
// (the process is gone, or /proc shows another PID namespace).
type ProcessOwner func(pid uint32) (owned, known bool)

// CgroupOwner is a ProcessOwner that reads /proc/<pid>/cgroup under procRoot
// ("/proc" when empty) and matches containerID, the engine's full container
// ID, in the cgroup paths: Docker's cgroup v1 (/docker/<id>), systemd's
// cgroup v2 (docker-<id>.scope) and the Kubernetes runtimes'
// (cri-containerd-<id>.scope, crio-<id>.scope, /kubepods/…/<id>) all name it.
// An ID shorter than 12 characters matches nothing.
func CgroupOwner(procRoot, containerID string) ProcessOwner {
	if procRoot == "" {
		procRoot = "/proc"
	}
	return func(pid uint32) (bool, bool) {
		data, err := os.ReadFile(filepath.Join(procRoot, strconv.FormatUint(uint64(pid), 10), "cgroup"))
		if err != nil {
			return false, false
		}
		if len(containerID) < 12 {
			return false, true
		}
		return strings.Contains(string(data), containerID), true
	}
}
