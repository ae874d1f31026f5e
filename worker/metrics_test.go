package worker

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/batoncrawl/baton/activities/cmdline/flagenv"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return string(b)
}

func TestMetricsServesTemporalAndBatonSeries(t *testing.T) {
	m, err := startMetrics("127.0.0.1:0", 0, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Temporal == nil || m.Baton == nil {
		t.Fatal("metrics on, but no handler or no Baton metrics")
	}
	m.Temporal.WithTags(map[string]string{"namespace": "default"}).Counter("temporal_request").Inc(1)
	m.Baton.Page("shop", 200, false, 10, time.Millisecond)

	url := "http://" + m.Addr + "/metrics"
	deadline := time.Now().Add(10 * time.Second)
	var out string
	for time.Now().Before(deadline) {
		out = get(t, url)
		// tally reports to Prometheus every second.
		if strings.Contains(out, `temporal_request_total{namespace="default"} 1`) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{`temporal_request_total{namespace="default"} 1`, `baton_pages_total{class="2xx",crawl_job="shop"} 1`, "go_goroutines ", "process_cpu_seconds_total "} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", out)
	}
}

func TestMetricsOff(t *testing.T) {
	m, err := startMetrics("", 0, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Temporal != nil || m.Baton != nil || m.Addr != "" {
		t.Fatalf("metrics off, but got %+v", m)
	}
}

func TestMetricsAddressTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if m, err := startMetrics(ln.Addr().String(), 0, quietLog()); err == nil {
		m.Close()
		t.Fatal("an explicit address that is taken must fail the start")
	}
}

func TestMetricsAddrFlag(t *testing.T) {
	if got := DefaultConfig().MetricsAddr; got != "127.0.0.1:9090" {
		t.Fatalf("default --metrics-addr %q", got)
	}
	for _, c := range []struct {
		env  string
		args []string
		want string
	}{
		{"", nil, "127.0.0.1:9090"},
		{"0.0.0.0:9100", nil, "0.0.0.0:9100"},
		{"0.0.0.0:9100", []string{"--metrics-addr", "127.0.0.1:9200"}, "127.0.0.1:9200"},
		{"", []string{"--metrics-addr", ""}, ""},
	} {
		if c.env != "" {
			t.Setenv("BATON_METRICS_ADDR", c.env)
		}
		cfg := DefaultConfig()
		fs := pflag.NewFlagSet("w", pflag.ContinueOnError)
		cfg.AddFlags(fs)
		flagenv.Document(fs, "BATON")
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := flagenv.Bind(fs); err != nil {
			t.Fatal(err)
		}
		if cfg.MetricsAddr != c.want {
			t.Errorf("env %q args %q: metrics addr %q, want %q", c.env, c.args, cfg.MetricsAddr, c.want)
		}
	}
	t.Setenv("BATON_METRICS_ADDR", "")
	cfg := DefaultConfig()
	fs := pflag.NewFlagSet("w", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	flagenv.Document(fs, "BATON")
	if err := flagenv.Bind(fs); err != nil || cfg.MetricsAddr != "" {
		t.Fatalf("BATON_METRICS_ADDR= (empty) gives %q, %v; want metrics off", cfg.MetricsAddr, err)
	}
}

// Go's profiler is off by default: /debug/pprof/ is not on the metrics
// address (404), and is served only on --pprof-addr.
func TestPprofOffByDefault(t *testing.T) {
	if got := DefaultConfig().PprofAddr; got != "" {
		t.Fatalf("default --pprof-addr %q, want off", got)
	}
	m, err := startMetrics("127.0.0.1:0", 0, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		resp, err := http.Get("http://" + m.Addr + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("metrics address %s: %s, want 404", p, resp.Status)
		}
	}
	stop, err := startPprof("", quietLog())
	if err != nil {
		t.Fatal(err)
	}
	stop()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	stop, err = startPprof(addr, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if out := get(t, "http://"+addr+"/debug/pprof/"); !strings.Contains(out, "goroutine") {
		t.Errorf("--pprof-addr /debug/pprof/: %.200s", out)
	}
	get(t, "http://"+addr+"/debug/pprof/heap")
	resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("--pprof-addr serves the command line: %s", resp.Status)
	}
	if _, err := startPprof(addr, quietLog()); err == nil {
		t.Error("a taken --pprof-addr must fail the start")
	}
	cfg := DefaultConfig()
	cfg.Name, cfg.PprofAddr = "sc-crawler_1", cfg.MetricsAddr
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--pprof-addr") {
		t.Errorf("--pprof-addr = --metrics-addr: %v", err)
	}
}
