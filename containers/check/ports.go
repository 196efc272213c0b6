package check

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// errProcHidden means the container's processes cannot be seen from here:
// the engine runs on another machine, or mce runs in another PID namespace.
var errProcHidden = errors.New("the container's processes are not visible from here (an engine on another machine, or mce in a container)")

// listeners returns the TCP sockets in LISTEN state in the network namespace
// of process pid, read from procRoot (normally /proc) after making sure the
// process belongs to the container containerID. Sorted, without repeats.
func listeners(procRoot string, pid int, containerID string) ([]netip.AddrPort, error) {
	if pid <= 0 {
		return nil, errors.New("the container has no running process")
	}
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
	if err != nil || !strings.Contains(string(cg), containerID) {
		return nil, errProcHidden
	}
	var out []netip.AddrPort
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(dir, "net", name))
		if errors.Is(err, os.ErrNotExist) && name == "tcp6" {
			continue // a kernel without IPv6
		}
		if err != nil {
			return nil, fmt.Errorf("reading the container's sockets: %w", err)
		}
		l, err := parseProcNet(io.LimitReader(f, 64<<20))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading the container's sockets (%s): %w", name, err)
		}
		out = append(out, l...)
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return slices.Compact(out), nil
}

// tcpListen is the state column's value for LISTEN in /proc/net/tcp.
const tcpListen = "0A"

// parseProcNet reads the listening sockets of a /proc/net/tcp or tcp6 table:
// a header line, then one line per socket whose second column is the local
// address as hex IP (32-bit words in host order, little-endian here) ":"
// hex port, and whose fourth is the state.
func parseProcNet(r io.Reader) ([]netip.AddrPort, error) {
	sc := bufio.NewScanner(r)
	var out []netip.AddrPort
	header := true
	for sc.Scan() {
		if header {
			header = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		if f[3] != tcpListen {
			continue
		}
		ap, err := parseHexAddr(f[1])
		if err != nil {
			return nil, err
		}
		out = append(out, ap)
	}
	return out, sc.Err()
}

func parseHexAddr(s string) (netip.AddrPort, error) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("bad local address %q", s)
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad port in %q", s)
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("bad address in %q", s)
	}
	// Each 32-bit word is written in the kernel's byte order, which is
	// little-endian on every machine Docker runs mce on (amd64, arm64).
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}

// dockerDNS is the address of the DNS resolver Docker embeds in every
// container on a user-defined network: its listener (on a random port) is
// the engine's, not the image's.
var dockerDNS = netip.MustParseAddr("127.0.0.11")

// otherPorts returns the listeners not on port, formatted for a report,
// leaving out Docker's embedded DNS resolver.
func otherPorts(ls []netip.AddrPort, port int) []string {
	var out []string
	for _, l := range ls {
		if int(l.Port()) != port && l.Addr() != dockerDNS {
			out = append(out, l.String())
		}
	}
	return out
}

// snapshotPorts adds the first copy's listening sockets to what was seen.
func (r *run) snapshotPorts() {
	ls, err := listeners(r.procRoot, r.pid, r.first)
	if err != nil {
		if r.portsErr == nil {
			r.portsErr = err
		}
		return
	}
	r.ports = append(r.ports, ls...)
	slices.SortFunc(r.ports, func(a, b netip.AddrPort) int { return a.Compare(b) })
	r.ports = slices.Compact(r.ports)
}

// portsResult reports listeners on other ports than SAGEMAKER_BIND_TO_PORT,
// seen right after /ping passed and again after the other checks.
func (r *run) portsResult() {
	name := r.namePorts()
	switch {
	case r.ports == nil && errors.Is(r.portsErr, errProcHidden):
		r.skip(r.portsErr.Error(), name)
	case r.ports == nil && r.portsErr != nil:
		r.addDur(name, Fail, 0, r.portsErr.Error())
	default:
		if other := otherPorts(r.ports, firstPort); len(other) > 0 {
			r.addDur(name, Fail, 0, "also listening on "+strings.Join(other, ", ")+
				": in a multi-container endpoint the containers share the instance's ports, so a fixed second port collides; use SAGEMAKER_BIND_TO_PORT, and SAGEMAKER_SAFE_PORT_RANGE for any other")
			return
		}
		if !slices.ContainsFunc(r.ports, func(p netip.AddrPort) bool { return int(p.Port()) == firstPort }) {
			r.addDur(name, Fail, 0, "no listener on port 8080 seen")
			return
		}
		var all []string
		for _, p := range r.ports {
			if p.Addr() != dockerDNS {
				all = append(all, p.String())
			}
		}
		r.addDur(name, Pass, 0, strings.Join(all, ", "))
	}
}
