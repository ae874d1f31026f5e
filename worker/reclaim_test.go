package worker

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

func TestWorkerGone(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip("no host name")
	}
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatalf("run true: %v", err)
	}
	for _, c := range []struct {
		identity string
		gone     bool
	}{
		{fmt.Sprintf("%d@%s@", done.Process.Pid, host), true},         // exited
		{fmt.Sprintf("%d@%s@", os.Getpid(), host), true},              // this pid: a previous incarnation
		{fmt.Sprintf("%d@%s@", os.Getppid(), host), false},            // running
		{fmt.Sprintf("%d@%s@", done.Process.Pid, "elsewhere"), false}, // another host: cannot tell
		{"worker-1", false},
		{"@" + host + "@", false},
		{"-5@" + host + "@", false},
	} {
		if got := workerGone(c.identity, host); got != c.gone {
			t.Errorf("workerGone(%q) = %v, want %v", c.identity, got, c.gone)
		}
	}
}
