//go:build !linux

package testsuite

import (
	"errors"
	"runtime"
	"testing"
	"time"
)

// NewHosts skips the test: network namespaces are Linux's.
func NewHosts(t testing.TB, n int) *Hosts {
	t.Helper()
	cannotMakeHosts(t, "network namespaces need Linux (this is %s)", runtime.GOOS)
	return nil
}

var errNoNetns = errors.New("testsuite: network namespaces need Linux")

// Partition is NewHosts's: never reached off Linux.
func (h *Hosts) Partition(i int) time.Time { h.t.Fatal(errNoNetns); return time.Time{} }

// Heal is NewHosts's: never reached off Linux.
func (h *Hosts) Heal(i int) time.Time { h.t.Fatal(errNoNetns); return time.Time{} }

// Dial is NewHosts's: never reached off Linux.
func (hs *Host) Dial(addr string, timeout time.Duration) error { return errNoNetns }

// Do is NewHosts's: never reached off Linux.
func (hs *Host) Do(fn func() error) error { return errNoNetns }
