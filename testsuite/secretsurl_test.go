package testsuite_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/testsuite"
)

// TestCrawlURLAndSettingSecretsStaySecret submits a job of a user crawler
// whose seed carries a user:password and a --secret-params token, and
// whose log-in hook gets a password from a secret --set key. The site
// receives all three (the token on the seed and on the discovered link
// that carries it too); none of them is in the job's workflow history,
// ZooKeeper, the store's files, a worker's log or the CLI's output.
func TestCrawlURLAndSettingSecretsStaySecret(t *testing.T) {
	const token, password, userPass = "tok-4e1d9a", "login-pw-77b3", "basic-pw-0c5e"
	var mu sync.Mutex
	var logins, pages []string
	release := make(chan struct{})
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/login":
			logins = append(logins, r.PostFormValue("password"))
			if r.PostFormValue("password") != password {
				http.Error(w, "no", http.StatusForbidden)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "in"})
		default:
			_, pw, _ := r.BasicAuth()
			ck, _ := r.Cookie("session")
			pages = append(pages, r.URL.Path+" "+r.URL.Query().Get("token")+" "+pw)
			if r.URL.Query().Get("token") != token || pw != userPass || ck == nil {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte(`<html><a href="/page2?token=` + token + `">next</a></html>`))
		}
	}))
	t.Cleanup(site.Close)
	t.Cleanup(func() { close(release) })

	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers, testsuite.WithWorkerBinary("./testsuite/testdata/logincrawler"))
	c.StartAll()
	c.WaitElected(90 * time.Second)
	seed := strings.Replace(site.URL, "http://", "http://ann:"+userPass+"@", 1) + "/page1?token=" + token
	// The submitter holds no private key: it seals with the group's
	// public key, which the worker published.
	noKey := filepath.Join(t.TempDir(), "absent.key")
	r := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "crawl", "--id", "url-secrets", "--wait", "--crawler", "login", "--secrets-key-file", noKey,
		"--set", "user=ann", "--set", "password="+password, "--secret-params", "token,sig", seed)...)
	require.Equal(t, 0, r.code, r.stderr)
	r2 := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "status", "url-secrets", "--output", "json")...)
	require.Equal(t, 0, r2.code, r2.stderr)
	r3 := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "results", "url-secrets")...)
	require.Equal(t, 0, r3.code, r3.stderr)
	r4 := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "results", "url-secrets", "--items")...)
	require.Equal(t, 0, r4.code, r4.stderr)

	mu.Lock()
	assert.Equal(t, []string{password}, logins, "the log-in hook got the secret setting")
	assert.ElementsMatch(t, []string{"/page1 " + token + " " + userPass, "/page2 " + token + " " + userPass}, pages,
		"the seed and the link that carries the same token were fetched with the token and the user:password")
	mu.Unlock()
	assert.Contains(t, r3.stdout, "token=REDACTED", "results show the URLs redacted")
	assert.Contains(t, r3.stdout, "/page2", "the link with the token was followed")
	assert.Contains(t, r.stderr, "seed URLs on the command line hold a user:password or a --secret-params value")

	where := secretPlaces(t, c, "url-secrets", r.stdout+r.stderr+r2.stdout+r2.stderr+r3.stdout+r3.stderr+r4.stdout+r4.stderr)
	for name, text := range where {
		for _, s := range []string{token, password, userPass} {
			assert.NotContains(t, text, s, "a secret value in the %s", name)
		}
	}

	// A key rotation re-wraps the job's data key for the new key, which
	// opens it; the old one does not any more.
	js := c.OpenStore()
	oldID, _, err := js.Secrets(context.Background(), "url-secrets")
	require.NoError(t, err, "the job's secrets are sealed in the store")
	newKey := filepath.Join(t.TempDir(), "new.key")
	rk := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "store", "rotate-key", "--new-key-file", newKey)...)
	require.Equal(t, 0, rk.code, rk.stderr)
	assert.Contains(t, rk.stdout, "1 jobs' data keys re-wrapped")
	next, err := jobs.LoadSecretsKey(newKey)
	require.NoError(t, err)
	keyID, sealed, err := js.Secrets(context.Background(), "url-secrets")
	require.NoError(t, err)
	assert.Equal(t, next.KeyID(), keyID)
	assert.NotEqual(t, oldID, keyID)
	opened, err := next.Open("url-secrets", sealed)
	require.NoError(t, err)
	assert.Equal(t, password, opened.CrawlerOptions["password"])
	old, err := jobs.LoadSecretsKey(filepath.Join(c.DataDir, jobs.DefaultSecretsKeyFile))
	require.NoError(t, err)
	_, err = old.Open("url-secrets", sealed)
	require.ErrorIs(t, err, jobs.ErrSecretsKey)

	// The sealed row goes with the job.
	r5 := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "jobs", "delete", "url-secrets")...)
	require.Equal(t, 0, r5.code, r5.stderr)
	assert.Contains(t, r5.stdout, "deleted job url-secrets")
	_, _, err = js.Secrets(context.Background(), "url-secrets")
	require.ErrorIs(t, err, jobs.ErrNoSecrets)
	r6 := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "results", "url-secrets")...)
	assert.NotEqual(t, 0, r6.code, "the job's results are gone: %s", r6.stdout)

	// A running job is not deleted.
	r7 := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "crawl", "--id", "running-job", site.URL+"/hang")...)
	require.Equal(t, 0, r7.code, r7.stderr)
	r8 := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "jobs", "delete", "running-job")...)
	assert.Equal(t, 2, r8.code, r8.stdout)
	assert.Contains(t, r8.stderr, "job running-job is running: cancel it first")
	r9 := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "cancel", "running-job")...)
	assert.Equal(t, 0, r9.code, r9.stderr)
}
