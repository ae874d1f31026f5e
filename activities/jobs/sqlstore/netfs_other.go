//go:build !linux

package sqlstore

// networkFS cannot tell on this platform.
func networkFS(string) (string, bool) { return "", false }
