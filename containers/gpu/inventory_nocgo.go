//go:build !cgo

package gpu

// This file replaces inventory.go in builds without cgo (CGO_ENABLED=0), such
// as the static mce image: go-nvml needs cgo, so there is no NVML here and
// every query reports ErrNoDriver. GPU requests then fail before anything
// starts, naming the missing driver, exactly as on a host without one.
// Containers that need GPUs are run by an mce built with cgo.

import (
	"errors"
	"fmt"
	"sync"
)

// errNoCgo is wrapped beside ErrNoDriver by every query.
var errNoCgo = errors.New("this mce was built without cgo (CGO_ENABLED=0), so it cannot load NVML")

// Device is one GPU as NVML reports it. Memory is in bytes, read when the
// Device was listed; MemoryUsed counts memory reserved by the driver, so it
// is the conservative figure for load decisions. Memory fields are zero on
// GPUs whose driver does not report memory.
type Device struct {
	Index       int
	UUID        string
	Name        string
	MemoryTotal uint64
	MemoryUsed  uint64
	MemoryFree  uint64
}

// Inventory lists the host's GPUs. Without cgo it has no NVML: every query
// returns an error wrapping ErrNoDriver, and ErrClosed after Close.
type Inventory struct {
	mu     sync.Mutex
	closed bool
}

// NewInventory returns an Inventory that reports ErrNoDriver. lib stands in
// for the nvml.Interface of cgo builds and is ignored (callers pass nil).
func NewInventory(lib any) *Inventory { return &Inventory{} }

func (inv *Inventory) err() error {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.closed {
		return ErrClosed
	}
	return fmt.Errorf("%w: %w", ErrNoDriver, errNoCgo)
}

// Devices returns an error wrapping ErrNoDriver.
func (inv *Inventory) Devices() ([]Device, error) { return nil, inv.err() }

// MIGDevices reports ErrNoDriver (or ErrClosed).
func (inv *Inventory) MIGDevices() ([]MIGDevice, error) { return nil, inv.err() }

// Memory returns an error wrapping ErrUnknownDevice for a negative index,
// else ErrNoDriver.
func (inv *Inventory) Memory(index int) (used, total uint64, err error) {
	if index < 0 {
		return 0, 0, fmt.Errorf("%w %d", ErrUnknownDevice, index)
	}
	return 0, 0, inv.err()
}

// Utilization returns an error wrapping ErrNoDriver (ErrUnknownDevice for a
// negative index).
func (inv *Inventory) Utilization(index int) (gpuPercent, memoryPercent float64, err error) {
	if index < 0 {
		return 0, 0, fmt.Errorf("%w %d", ErrUnknownDevice, index)
	}
	return 0, 0, inv.err()
}

// ContainerMemory returns an error wrapping ErrNoDriver (ErrUnknownDevice
// for a negative index).
func (inv *Inventory) ContainerMemory(index int, owner ProcessOwner) (used, total uint64, ok bool, err error) {
	if index < 0 {
		return 0, 0, false, fmt.Errorf("%w %d", ErrUnknownDevice, index)
	}
	return 0, 0, false, inv.err()
}

// Close marks the Inventory closed; it may be called more than once.
func (inv *Inventory) Close() error {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.closed = true
	return nil
}
