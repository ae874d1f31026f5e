// Command logincrawler is a worker binary for tests: its crawler "login"
// logs in with the job's secret --set password in its Start hook, then
// follows the links of each page and pushes each page's URL.
package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/worker"
)

// Options are the crawler's --set options.
type Options struct {
	User     string `json:"user"`
	Password string `json:"password" baton:"secret"`
}

func main() {
	c := crawler.New("login", "1")
	c.Options(&Options{})
	c.Start = func(ctx context.Context, job crawler.JobInfo) ([]*http.Cookie, error) {
		o := job.Options.(*Options)
		seed, err := url.Parse(job.Seeds[0])
		if err != nil {
			return nil, err
		}
		form := url.Values{"user": {o.User}, "password": {o.Password}}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, seed.Scheme+"://"+seed.Host+"/login", strings.NewReader(form.Encode()))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := crawler.Client(ctx).Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("log-in: HTTP %d", resp.StatusCode)
		}
		return resp.Cookies(), nil
	}
	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
		if _, err := p.EnqueueLinks("a[href]", "", nil); err != nil {
			return err
		}
		return p.Push(map[string]string{"url": p.Request.URL})
	})
	os.Exit(worker.Main(c))
}
