package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// RuntimeInfo is what Check and Mode need from the Docker engine's /info:
// the names of its registered runtimes and the default one, its CDI spec
// folders (empty when the "cdi" feature is off or the engine predates it),
// the CDI devices it found (listed from API 1.50 on), and the API version
// the client speaks with it ("" when unknown).
type RuntimeInfo struct {
	Runtimes       []string
	DefaultRuntime string
	CDISpecDirs    []string
	CDIDevices     []string
	APIVersion     string
}

// hasNVIDIA reports whether the engine has an NVIDIA container runtime
// ("nvidia", or a variant such as "nvidia-cdi" that nvidia-ctk registers).
func (rt RuntimeInfo) hasNVIDIA() bool {
	isNVIDIA := func(name string) bool {
		return name == "nvidia" || strings.HasPrefix(name, "nvidia-")
	}
	return isNVIDIA(rt.DefaultRuntime) || slices.ContainsFunc(rt.Runtimes, isNVIDIA)
}

// Check reports whether req can be met on this host, before anything starts.
// devs and devErr are what Inventory.Devices returned; rt describes the
// Docker engine. A zero req always passes. Otherwise the driver and GPUs are
// checked first (ErrNoDriver, ErrNoGPU, ErrTooMany, ErrUnknownDevice), then
// the engine's runtime (ErrNoRuntime). Every error names the request and,
// where GPUs are missing, lists those that exist. A request naming MIG
// partitions by UUID is checked against migs, what
// Inventory.MIGDevices listed.
func Check(req Request, devs []Device, devErr error, rt RuntimeInfo, migs ...MIGDevice) error {
	if req.IsZero() {
		return nil
	}
	if err := req.validate(); err != nil {
		return err
	}
	if devErr != nil {
		if errors.Is(devErr, ErrNoDriver) {
			return fmt.Errorf("GPU requested (%s) but %w", req, devErr)
		}
		return fmt.Errorf("GPU requested (%s) but the GPUs could not be listed: %w", req, devErr)
	}
	if len(devs) == 0 {
		return fmt.Errorf("GPU requested (%s) but %w", req, ErrNoGPU)
	}
	if req.Count > len(devs) {
		return fmt.Errorf("GPU requested (%s) but %w: %s", req, ErrTooMany, describe(devs))
	}
	if missing := missingIDs(req.DeviceIDs, devs, migs); len(missing) > 0 {
		return fmt.Errorf("GPU requested (%s) but %w %s: %s%s", req, ErrUnknownDevice, strings.Join(missing, ", "), describe(devs), describeMIG(missing, migs))
	}
	if rt.Mode() == ModeNone {
		names := slices.Clone(rt.Runtimes)
		slices.Sort(names)
		list := strings.Join(names, ", ")
		if list == "" {
			list = "none"
		}
		if rt.CDIEnabled() {
			return fmt.Errorf("GPU requested (%s) but %w (runtimes: %s) and %w (CDI spec folders: %s; CDI devices: %s)", req, ErrNoRuntime, list,
				ErrNoCDISpec, strings.Join(rt.CDISpecDirs, ", "), orNone(rt.CDIDevices))
		}
		return fmt.Errorf("GPU requested (%s) but %w (runtimes: %s) and CDI is off (no CDI spec folders); install nvidia-container-toolkit", req, ErrNoRuntime, list)
	}
	return nil
}

// describeMIG lists the MIG partitions when a missing ID names one: "; its
// MIG partitions: 1:0 MIG-… (3g.40gb), …" or "; no GPU is in MIG mode".
func describeMIG(missing []string, migs []MIGDevice) string {
	if !slices.ContainsFunc(missing, IsMIG) {
		return ""
	}
	if len(migs) == 0 {
		return "; no GPU has MIG partitions (MIG mode off, or none created)"
	}
	var b strings.Builder
	b.WriteString("; its MIG partitions: ")
	for i, m := range migs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d:%d %s (%s)", m.Parent, m.Index, m.UUID, orUnknown(m.Profile))
	}
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "profile unknown"
	}
	return s
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// missingIDs returns the IDs, indexes or UUIDs, that match no device, and
// the MIG UUIDs that match no partition of migs.
func missingIDs(ids []string, devs []Device, migs []MIGDevice) []string {
	var missing []string
	for _, id := range ids {
		found := slices.ContainsFunc(devs, func(d Device) bool {
			return strconv.Itoa(d.Index) == id || strings.EqualFold(d.UUID, id)
		})
		if IsMIG(id) {
			found = slices.ContainsFunc(migs, func(m MIGDevice) bool { return strings.EqualFold(m.UUID, id) })
		}
		if !found {
			missing = append(missing, id)
		}
	}
	return missing
}

// describe lists devs for error messages: "this host has 2 GPUs: 0 GPU-… (Name), …".
func describe(devs []Device) string {
	var b strings.Builder
	fmt.Fprintf(&b, "this host has %d GPU", len(devs))
	if len(devs) != 1 {
		b.WriteString("s")
	}
	for i, d := range devs {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s (%s)", d.Index, d.UUID, d.Name)
	}
	return b.String()
}
