// Package exitcode is the exit-code scheme of Baton's two binaries, baton
// and baton-worker, so that scripts and supervisors can tell a bad flag
// from a server that is down:
//
//	0  success (baton-worker: stopped cleanly on SIGTERM or Ctrl-C)
//	1  failure at run time (the catch-all)
//	2  bad usage or input: unknown command or flag, bad flag value or
//	   configuration; nothing was done
//	3  not found: no such job, group or instance
//	4  the job ended cancelled or failed (baton crawl --wait)
//	5  unavailable: ZooKeeper, Temporal or the job store could not be
//	   reached within the connect timeout
//	6  no live Runner: baton crawl --wait gave up waiting for one (the job
//	   stays queued and runs when a Runner joins)
//	130 interrupted: Ctrl-C (or SIGTERM) stopped baton crawl --wait; the
//	   job goes on (128 + SIGINT, as a shell reports it)
package exitcode

import (
	"errors"
	"fmt"
)

// The exit codes.
const (
	OK          = 0
	Failure     = 1
	Usage       = 2
	NotFound    = 3
	JobFailed   = 4
	Unavailable = 5
	NoRunner    = 6
	Interrupted = 130
)

// Error is an error with the exit code it ends the process with.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the error.
func (e *Error) Unwrap() error { return e.Err }

// With returns err with code (nil for a nil err).
func With(code int, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// Usagef returns a bad-usage error (code 2).
func Usagef(format string, args ...any) error {
	return &Error{Code: Usage, Err: fmt.Errorf(format, args...)}
}

// Of returns the exit code of err: 0 for nil, the code of the outermost
// Error in its chain, else 1.
func Of(err error) int {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Failure
}
