package main

import (
	"fmt"

	"github.com/docker/go-units"
)

// byteSize is a flag of bytes written as "256MiB", "1GiB", "512m" or a
// plain number of bytes (binary units, as docker's --memory).
type byteSize int64

func (b *byteSize) String() string { return units.BytesSize(float64(*b)) }

func (b *byteSize) Set(s string) error {
	n, err := units.RAMInBytes(s)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a size such as 256MiB", s)
	}
	*b = byteSize(n)
	return nil
}

func (b *byteSize) Type() string { return "size" }
