package telemetry

import (
	"testing"
	"time"
)

func TestNilMetricsIsNoOp(t *testing.T) {
	var m *Metrics
	m.Page("j", 200, false, 1, time.Second)
	m.PageError("j")
	m.Retries("j", 3)
	m.RobotsRefusal("j")
	m.Queued("j", 1)
	m.Failover(KindRunner)
	m.Detected(time.Second)
	m.PeerAge("p", time.Second)
	m.ForgetPeer("p")
	m.TaskStarted()()
}

func TestClass(t *testing.T) {
	for _, c := range []struct {
		status int
		failed bool
		want   string
	}{
		{200, false, "2xx"}, {204, false, "2xx"}, {302, false, "3xx"}, {404, true, "4xx"}, {404, false, "4xx"},
		{500, true, "5xx"}, {0, true, "error"}, {0, false, "error"}, {200, true, "error"}, {101, false, "error"}, {700, false, "error"},
	} {
		if got := Class(c.status, c.failed); got != c.want {
			t.Errorf("Class(%d, %v) = %q, want %q", c.status, c.failed, got, c.want)
		}
	}
}
