package worker

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"

	"go.temporal.io/sdk/worker"
)

// useBuildIDAsChecksum gives the Temporal SDK this executable's Go build
// ID as its binary checksum (the identity its workflow tasks are
// completed with, Temporal's reset points). Without it the SDK reads and
// hashes the whole executable, tens of megabytes, as the first worker
// starts: CPU that every process of a cluster started at once pays
// together. The build ID is the hash the Go toolchain computed of the
// binary's inputs and content, as unique. Where it cannot be read (not an
// ELF executable), the SDK computes its own checksum as before.
func useBuildIDAsChecksum() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	if id, err := goBuildID(exe); err == nil {
		worker.SetBinaryChecksum(id)
	}
}

// goBuildID reads the Go build ID of the ELF executable at path from its
// .note.go.buildid note (what `go tool buildid` prints).
func goBuildID(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := f.Section(".note.go.buildid")
	if s == nil {
		return "", errors.New("no .note.go.buildid section")
	}
	data, err := s.Data()
	if err != nil {
		return "", err
	}
	// One note: namesz, descsz, type (4 bytes each, the file's byte
	// order), the name "Go\0\0", then the build ID.
	if len(data) < 16 {
		return "", errors.New("short .note.go.buildid")
	}
	order := f.ByteOrder
	namesz, descsz := order.Uint32(data[0:]), order.Uint32(data[4:])
	const noteType = 4
	if namesz != 4 || order.Uint32(data[8:]) != noteType || !bytes.Equal(data[12:16], []byte("Go\x00\x00")) ||
		uint64(len(data)) < 16+uint64(descsz) || descsz == 0 {
		return "", errors.New("malformed .note.go.buildid")
	}
	return string(data[16 : 16+descsz]), nil
}
