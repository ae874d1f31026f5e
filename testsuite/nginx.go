package testsuite

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Nginx is an nginx server the harness started, serving a directory of
// static files on a loopback port.
type Nginx struct {
	// URL is http://127.0.0.1:PORT (no trailing slash).
	URL string
	// AccessLog is its access log: a line per request, "$msec $status
	// $request_uri" (ReadAccessLog reads it).
	AccessLog string
	proc      *Process
}

// NginxBin finds nginx ($BATON_NGINX_BIN, then $PATH, then /usr/sbin).
func NginxBin() (string, error) {
	if b := os.Getenv("BATON_NGINX_BIN"); b != "" {
		return b, nil
	}
	if b, err := exec.LookPath("nginx"); err == nil {
		return b, nil
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx", nil
	}
	return "", fmt.Errorf("nginx not found: bash deployments/scripts/install-realsite.sh installs it")
}

// StartNginx serves root with nginx on a free loopback port until the
// test ends; it skips the test (saying why) where nginx is missing.
func StartNginx(t testing.TB, root string) *Nginx {
	t.Helper()
	bin, err := NginxBin()
	if err != nil {
		t.Skip(err.Error())
	}
	port := FreePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	cfg := fmt.Sprintf(`worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
  include /etc/nginx/mime.types;
  log_format baton '$msec $status $request_uri';
  access_log %[1]s/access.log baton;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  keepalive_requests 100000;
  server {
    listen 127.0.0.1:%[2]d;
    root %[3]s;
    index index.html;
  }
}
`, dir, port, root)
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatalf("nginx: %v", err)
	}
	n := &Nginx{URL: fmt.Sprintf("http://127.0.0.1:%d", port), AccessLog: filepath.Join(dir, "access.log")}
	n.proc = StartProcess(t, ProcessSpec{Name: "nginx", Path: bin, Args: []string{"-p", dir, "-c", conf, "-g", "daemon off;"}})
	Eventually(t, 30*time.Second, "nginx answers", func() (bool, error) {
		resp, err := http.Get(n.URL + "/")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return n
}
