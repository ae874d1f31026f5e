package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/converter"
)

// codecServerCmd is `baton codec-server`: Temporal's remote codec
// endpoint, so that the Web UI (and `temporal workflow show
// --codec-endpoint`) shows the payloads that --payload-key-file encrypts.
func codecServerCmd(tf *temporalFlags) *cobra.Command {
	var addr, origin string
	cmd := &cobra.Command{
		Use:   "codec-server",
		Short: "Serve the payload codec (--payload-key-file) for the Temporal Web UI: it decodes Baton's encrypted payloads",
		Long: `codec-server serves Temporal's remote codec protocol (POST /encode, /decode)
with the key of --payload-key-file, for the Web UI's "Codec Server" setting
(Settings → Codec Server → http://127.0.0.1:8081) and for
'temporal workflow show --codec-endpoint'. Bind it to loopback: whoever
reaches it reads every payload. Only the Web UI's origin (--web-ui-origin)
may call it from a browser.`,
		Example: `  baton codec-server --payload-key-file payload.key --addr 127.0.0.1:8081 --web-ui-origin http://127.0.0.1:8233`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tf.conn.PayloadKeyFile == "" {
				return usage("--payload-key-file: required (the key the group's workers encrypt with)")
			}
			codec, err := tf.conn.PayloadCodec()
			if err != nil {
				return usage("%v", err)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return usage("--addr %s: %v", addr, err)
			}
			h := converter.NewPayloadCodecHTTPHandler(codec)
			srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if o := r.Header.Get("Origin"); o != "" {
					if o != origin {
						http.Error(w, "origin not allowed", http.StatusForbidden)
						return
					}
					w.Header().Set("Access-Control-Allow-Origin", origin)
					w.Header().Set("Access-Control-Allow-Credentials", "true")
					w.Header().Set("Access-Control-Allow-Headers", "Content-Type,X-Namespace,Authorization")
					w.Header().Set("Access-Control-Allow-Methods", "POST,OPTIONS")
				}
				if r.Method == http.MethodOptions {
					return
				}
				r.Body = http.MaxBytesReader(w, r.Body, 64<<20)
				h.ServeHTTP(w, r)
			})}
			fmt.Fprintf(cmd.ErrOrStderr(), "codec server on http://%s (key %s), for the Web UI at %s\n", ln.Addr(), codec.KeyID(), origin)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				srv.Shutdown(sctx)
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8081", "listen address (keep it on loopback)")
	cmd.Flags().StringVar(&origin, "web-ui-origin", "http://127.0.0.1:8233", "the Web UI's origin, the only one a browser may call from")
	return cmd
}
