package main

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mce-run/mce/containers/artifact"
	kengine "github.com/mce-run/mce/containers/kubernetes"
)

// The --model-volume flag of the kubernetes engine: a volume the fetch init
// containers read file:// model data from, mounted read-only.
//
//	NAME=hostPath:/node/folder[:/mount]   a folder on every node (Directory: it must exist)
//	NAME=pvc:CLAIM[:/mount]               a PersistentVolumeClaim in the endpoints' namespace
//
// The mount defaults to /models/NAME. A ModelDataUrl file:///mount/... is
// then read, inside the pod, from that volume; nothing else is file://.

const modelVolumePrefix = "mv-" // pod volume names: never the engine's own model-N

var (
	volumeName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	claimName  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// parseModelVolumes checks every --model-volume value; the errors name the
// value and what is wrong with it.
func parseModelVolumes(vals []string) ([]kengine.ModelVolume, error) {
	var out []kengine.ModelVolume
	names := map[string]bool{}
	for _, v := range vals {
		mv, err := parseModelVolume(v)
		if err != nil {
			return nil, fmt.Errorf("--model-volume %q: %w", v, err)
		}
		if names[mv.Volume.Name] {
			return nil, fmt.Errorf("--model-volume %q: the name %s is given twice", v, strings.TrimPrefix(mv.Volume.Name, modelVolumePrefix))
		}
		names[mv.Volume.Name] = true
		for _, o := range out {
			if nested(o.MountPath, mv.MountPath) {
				return nil, fmt.Errorf("--model-volume %q: mount %s overlaps %s's %s", v, mv.MountPath,
					strings.TrimPrefix(o.Volume.Name, modelVolumePrefix), o.MountPath)
			}
		}
		out = append(out, mv)
	}
	return out, nil
}

func parseModelVolume(v string) (kengine.ModelVolume, error) {
	var mv kengine.ModelVolume
	name, src, ok := strings.Cut(v, "=")
	if !ok {
		return mv, fmt.Errorf("want NAME=hostPath:/folder[:/mount] or NAME=pvc:CLAIM[:/mount]")
	}
	if len(name) > 50 || !volumeName.MatchString(name) {
		return mv, fmt.Errorf("the name %q must be a DNS label (lower-case letters, digits and -) of at most 50 characters", name)
	}
	kind, rest, _ := strings.Cut(src, ":")
	ref, mount, hasMount := strings.Cut(rest, ":")
	if !hasMount {
		mount = "/models/" + name
	}
	if err := checkMount(mount); err != nil {
		return mv, err
	}
	mv.MountPath = mount
	mv.Volume.Name = modelVolumePrefix + name
	switch kind {
	case "hostPath":
		if !path.IsAbs(ref) || path.Clean(ref) != ref {
			return mv, fmt.Errorf("the hostPath %q must be an absolute, clean path", ref)
		}
		if artifact.SystemFolder(ref) {
			return mv, fmt.Errorf("the hostPath %q is / or a system folder (or holds one), which never holds model data", ref)
		}
		dir := corev1.HostPathDirectory
		mv.Volume.HostPath = &corev1.HostPathVolumeSource{Path: ref, Type: &dir}
	case "pvc":
		if len(ref) > 253 || !claimName.MatchString(ref) {
			return mv, fmt.Errorf("the claim %q must be a DNS subdomain name (lower-case letters, digits, - and .)", ref)
		}
		mv.Volume.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ref, ReadOnly: true}
	default:
		return mv, fmt.Errorf("the source %q is neither hostPath:/folder nor pvc:CLAIM", kind)
	}
	return mv, nil
}

// checkMount refuses a mount path the init container could not use or that
// would cover its own folders.
func checkMount(m string) error {
	switch {
	case !path.IsAbs(m) || path.Clean(m) != m || strings.ContainsAny(m, ",\n\x00"):
		return fmt.Errorf("the mount %q must be an absolute, clean path", m)
	case artifact.SystemFolder(m):
		return fmt.Errorf("the mount %q is / or a system folder (or holds one)", m)
	case nested(m, "/mnt/model"), nested(m, kengine.ModelDir):
		return fmt.Errorf("the mount %q overlaps where model data is written (/mnt/model) or served (%s)", m, kengine.ModelDir)
	}
	return nil
}

// nested reports whether one of two clean absolute paths is the other or
// lies below it.
func nested(a, b string) bool {
	return a == b || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// podModelData checks CreateModel's ModelDataUrl on the kubernetes engine:
// file:// data is read inside the pod, so its path must be absolute and lie
// in a --model-volume's mount (or a --model-root, which the init container
// gets too); s3:// and https:// pass.
type podModelData struct {
	mounts []string
}

func (p podModelData) CheckModelDataURL(u, _ string) error {
	rest, ok := strings.CutPrefix(u, "file://")
	if !ok || rest == "" {
		return nil
	}
	if !path.IsAbs(rest) {
		return fmt.Errorf("model data %q: on the kubernetes engine a file:// URL is a path in the pod, absolute, under a --model-volume's mount", u)
	}
	clean := path.Clean(rest)
	for _, m := range p.mounts {
		if clean == m || strings.HasPrefix(clean, m+"/") {
			return nil
		}
	}
	if len(p.mounts) == 0 {
		return fmt.Errorf("model data %q: on the kubernetes engine file:// data comes from volumes, and mce serve has no --model-volume", u)
	}
	return fmt.Errorf("model data %q is outside the model volumes (%s); on the kubernetes engine file:// data is read in the pod from a --model-volume's mount", u, strings.Join(p.mounts, ", "))
}
