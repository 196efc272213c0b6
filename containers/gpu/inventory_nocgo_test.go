//go:build !cgo

package gpu

import (
	"errors"
	"testing"
)

func TestInventoryWithoutCgo(t *testing.T) {
	inv := NewInventory(nil)
	if _, err := inv.Devices(); !errors.Is(err, ErrNoDriver) {
		t.Errorf("Devices() error = %v, want ErrNoDriver", err)
	}
	if _, _, err := inv.Memory(0); !errors.Is(err, ErrNoDriver) {
		t.Errorf("Memory(0) error = %v, want ErrNoDriver", err)
	}
	if _, _, err := inv.Memory(-1); !errors.Is(err, ErrUnknownDevice) {
		t.Errorf("Memory(-1) error = %v, want ErrUnknownDevice", err)
	}
	if _, _, err := inv.Utilization(0); !errors.Is(err, ErrNoDriver) {
		t.Errorf("Utilization(0) error = %v, want ErrNoDriver", err)
	}
	devs, derr := inv.Devices()
	err := Check(Request{Count: 1}, devs, derr, RuntimeInfo{Runtimes: []string{"nvidia"}})
	if !errors.Is(err, ErrNoDriver) {
		t.Errorf("Check() error = %v, want ErrNoDriver", err)
	}
	if err := inv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := inv.Devices(); !errors.Is(err, ErrClosed) {
		t.Errorf("Devices() after Close error = %v, want ErrClosed", err)
	}
}
