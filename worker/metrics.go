package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"

	"github.com/batoncrawl/baton/activities/telemetry"
)

// defaultMetricsAddr is --metrics-addr's default. Several workers on one
// host cannot all have it: a worker that finds it taken runs without
// metrics (and says so); an address set to anything else must be free.
const defaultMetricsAddr = "127.0.0.1:9090"

// metricsServer serves a worker's Prometheus metrics at /metrics: the
// Temporal SDK's (through tally, Temporal's documented way) and Baton's own
// (activities/telemetry), plus the Go runtime's and the process's, and
// Go's profiler at /debug/pprof/.
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

// startMetrics serves /metrics on addr; addr "" turns metrics off.
func startMetrics(addr string, log *slog.Logger) (*metricsServer, error) {
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
	baton, err := telemetry.New(reg)
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
	// Go's profiler, beside the metrics (the same address: keep it private).
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
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
