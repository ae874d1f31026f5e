package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// atomicFile is an output written to a temporary file beside its path and
// renamed over it by Commit: readers see the old file or the whole new
// one, an existing file is never truncated in place, and a symbolic link
// at the path is replaced, never followed. Abort (deferred) removes the
// temporary file unless Commit ran.
type atomicFile struct {
	*os.File
	path string
	done bool
}

func createAtomic(path string) (*atomicFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &atomicFile{File: f, path: path}, nil
}

// Commit closes the file and renames it into place.
func (a *atomicFile) Commit() error {
	if err := a.File.Close(); err != nil {
		return fmt.Errorf("write %s: %w", a.path, err)
	}
	if err := os.Rename(a.File.Name(), a.path); err != nil {
		return fmt.Errorf("write %s: %w", a.path, err)
	}
	a.done = true
	return nil
}

// Abort drops the file unless Commit ran.
func (a *atomicFile) Abort() {
	if !a.done {
		a.File.Close()
		os.Remove(a.File.Name())
	}
}

// writeFileAtomic writes data to path through an atomicFile.
func writeFileAtomic(path string, data []byte) error {
	f, err := createAtomic(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}
