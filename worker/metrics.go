package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"

	"github.com/batoncrawl/baton/activities/telemetry"
	"github.com/batoncrawl/baton/activities/telemetry/prommetrics"
)

// defaultMetricsAddr is --metrics-addr's default. Several workers on one
// host cannot all have it: a worker that finds it taken runs without
// metrics (and says so); an address set to anything else must be free.
const defaultMetricsAddr = "127.0.0.1:9090"

// metricsServer serves a worker's Prometheus metrics at /metrics: the
// Temporal SDK's (through tally, Temporal's documented way) and Baton's own
// (activities/telemetry), plus the Go runtime's and the process's. Go's
// profiler is not there: it is served only on --pprof-addr (startPprof).
type metricsServer struct {
	// Temporal is the client's MetricsHandler; nil when metrics are off.
	Temporal client.MetricsHandler
	// Baton is the activities' metrics; nil when metrics are off.
	Baton *telemetry.Metrics
	// Addr is where /metrics is served; "" when metrics are off.
	Addr  string
	close func()
}

// Close stops serving and flushes nothing more.
func (s *metricsServer) Close() {
	if s.close != nil {
		s.close()
	}
}

// startMetrics serves /metrics on addr; addr "" turns metrics off. A
// crawl job's series are dropped after jobGrace idle (0: the default).
func startMetrics(addr string, jobGrace time.Duration, log *slog.Logger) (*metricsServer, error) {
	if addr == "" {
		return &metricsServer{}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if addr == defaultMetricsAddr {
			log.Warn("metrics off: the default metrics address is taken (another worker on this host?); give each worker its own --metrics-addr",
				"metrics_addr", addr, "err", err)
			return &metricsServer{}, nil
		}
		return nil, fmt.Errorf("metrics-addr: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	baton, err := prommetrics.NewWith(reg, telemetry.Options{JobGrace: jobGrace})
	if err != nil {
		ln.Close()
		return nil, err
	}
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:       reg,
		DefaultTimerType: tallyprom.HistogramTimerType,
		OnRegisterError: func(err error) {
			log.Warn("temporal metric not exported", "component", "metrics", "err", err)
		},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return &metricsServer{
		Temporal: sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)),
		Baton:    baton,
		Addr:     ln.Addr().String(),
		close: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
			_ = closer.Close()
		},
	}, nil
}

// startPprof serves Go's profiler at http://<addr>/debug/pprof/ when addr
// is set (--pprof-addr; off by default). It is an address of its own, never
// the metrics one: a profile or a trace costs CPU and shows the process's
// memory, so it is for an operator to open on purpose, on loopback. The
// command line is not served (/debug/pprof/cmdline). The returned stop
// closes the server.
func startPprof(addr string, log *slog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof server stopped", "err", err)
		}
	}()
	url := "http://" + ln.Addr().String() + "/debug/pprof/"
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil && !ap.Addr().IsLoopback() {
		log.Warn("serving Go's profiler on a non-loopback address: anyone who reaches it can profile and trace this process", "url", url)
	} else {
		log.Info("serving Go's profiler", "url", url)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
