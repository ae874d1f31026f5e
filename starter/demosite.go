package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
)

// demoSiteCmd serves the demo site from the project itself.
func demoSiteCmd() *cobra.Command {
	cfg := demosite.DefaultConfig()
	var addr, accessLog string
	cmd := &cobra.Command{
		Use:   "demo-site",
		Short: "Serve the demo site: interlinked product pages, broken links, a robots.txt-disallowed section, a slow page",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Pages < 1 {
				return usage("--pages must be >= 1")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			fmt.Fprintf(cmd.OutOrStdout(), "demo site: %d pages on http://%s/ (robots.txt disallows /private/)\n", cfg.Pages, addr)
			return serveDemoSite(ctx, addr, cfg, accessLog)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8000", "listen address (loopback)")
	f.IntVar(&cfg.Pages, "pages", cfg.Pages, "number of product pages")
	f.IntVar(&cfg.BrokenLinks, "broken-links", cfg.BrokenLinks, "number of broken links (404)")
	f.DurationVar(&cfg.SlowPage, "slow-page", cfg.SlowPage, "delay of /slow.html")
	f.DurationVar(&cfg.Latency, "latency", cfg.Latency, "delay of every response")
	f.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the link graph")
	f.IntVar(&cfg.CrossLinks, "cross-links", cfg.CrossLinks, "links from every page to pages all over the site, as a documentation site has (0: a sparse shop)")
	f.StringVar(&accessLog, "access-log", "", "write a line per request to this file: seconds since the epoch to the millisecond, status, URI (nginx's $msec $status $request_uri)")
	f.IntVar(&cfg.Recrawl, "recrawl", cfg.Recrawl, "pages of the recrawl section under /recrawl/: they answer 304 to their validators, every tenth changes at each revision (curl -X POST .../recrawl/revision), two disappear after the first (docs/recrawl.md)")
	return cmd
}

// serveDemoSite serves the demo site on addr until ctx ends, logging its
// requests to accessLog ("": none).
func serveDemoSite(ctx context.Context, addr string, cfg demosite.Config, accessLog string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	var site http.Handler = demosite.New(cfg)
	if accessLog != "" {
		f, err := os.OpenFile(accessLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			ln.Close()
			return fmt.Errorf("--access-log: %w", err)
		}
		defer f.Close()
		site = demosite.NewAccessLog(site, f)
	}
	err = demosite.Serve(ctx, ln, site)
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
