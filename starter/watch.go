package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/batoncrawl/baton/activities/metadata"
)

// clock is the time source of watchCluster.
type clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// ANSI: cursor home, clear the screen.
const clearScreen = "\x1b[H\x1b[2J"

// watchCluster prints a frame of printCluster every interval until ctx
// ends (Ctrl-C or SIGTERM in the CLI), which is a clean stop. On a
// terminal each frame replaces the previous one; otherwise the frames
// follow each other, separated by a blank line. Each frame is rendered
// whole before it is written, and an error reading the cluster is shown in
// the frame: the watch goes on.
func watchCluster(ctx context.Context, w io.Writer, c *metadata.Cluster, interval time.Duration, tty bool, clk clock) error {
	for n := 0; ; n++ {
		now := clk.Now()
		var frame bytes.Buffer
		if tty {
			frame.WriteString(clearScreen)
		} else if n > 0 {
			frame.WriteString("\n")
		}
		fmt.Fprintf(&frame, "Every %v: baton cluster    %s\n\n", interval, now.Format(time.RFC3339))
		err := printCluster(ctx, &frame, c, now)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			fmt.Fprintf(&frame, "error: %v\n", err)
		}
		if _, err := w.Write(frame.Bytes()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-clk.After(interval):
		}
	}
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// watchClusterJSON writes the cluster as one JSON line every interval
// until ctx ends, for a program to follow (jq -c, a log shipper). An error
// reading the cluster is a line {"at", "error"}: the watch goes on.
func watchClusterJSON(ctx context.Context, w io.Writer, c *metadata.Cluster, interval time.Duration, clk clock) error {
	enc := json.NewEncoder(w)
	for {
		now := clk.Now()
		v, err := readCluster(ctx, c, now)
		if ctx.Err() != nil {
			return nil
		}
		var line any = v
		if err != nil {
			line = struct {
				At    time.Time `json:"at"`
				Error string    `json:"error"`
			}{now.UTC(), err.Error()}
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-clk.After(interval):
		}
	}
}
