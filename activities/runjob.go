package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobstore"
	"github.com/batoncrawl/baton/roles"
)

// jobRequest fetches one request of a crawl-job Task through the crawl
// engine, records the page in the job's results (once per URL, whatever
// retries and hand-overs happened: a page recorded by a holder that died
// before it could advance next_index is not fetched again), feeds the links
// found back into the job's frontier and returns the bounded summary kept
// in the Task znode.
func (a *Activities) jobRequest(ctx context.Context, m Member, t roles.Task, req roles.Request) (roles.ResultDetail, error) {
	js, err := a.jobs()
	if err != nil {
		return roles.ResultDetail{}, err
	}
	if a.Pages == nil {
		return roles.ResultDetail{}, errors.New("run job task: no page fetcher configured")
	}
	var spec JobSpec
	if err := js.Meta(t.Job.ID, &spec); err != nil {
		return roles.ResultDetail{}, fmt.Errorf("run job task: %w", err)
	}
	opts := spec.Options
	if len(t.Job.Options) > 0 {
		if err := json.Unmarshal(t.Job.Options, &opts); err != nil {
			return roles.ResultDetail{}, fmt.Errorf("task job.options: %w", err)
		}
	}
	d := roles.ResultDetail{TaskID: req.TaskID, URL: req.URL, State: roles.TaskDone}
	if done, err := js.Recorded(t.Job.ID, req.URL); err != nil {
		return d, err
	} else if done {
		d.Response = "recorded before"
		return d, nil
	}
	page := a.Pages.Fetch(ctx, req, crawl.Auth{Cookie: t.Cookie, Authorization: t.Authorization}, req.Depth, opts)
	if ctx.Err() != nil {
		return d, ctx.Err()
	}
	a.Metrics.Page(page.StatusCode, page.Error != "", page.Bytes, time.Duration(page.DurationMS)*time.Millisecond)
	if len(page.Links) > 0 {
		entries := make([]jobstore.Entry, 0, len(page.Links))
		for _, l := range page.Links {
			entries = append(entries, jobstore.Entry{URL: l, Depth: req.Depth + 1})
		}
		if _, err := js.Enqueue(t.Job.ID, entries, spec.MaxPages); err != nil {
			return d, err
		}
	}
	if page.Disallowed {
		// Not fetched, so not a page of the results; the Task keeps the reason.
		d.State, d.ErrorMsg = roles.TaskTerminate, page.Error
		return d, nil
	}
	rec := PageRecord{Page: page, Job: t.Job.ID, Batch: t.Job.Batch, Runner: m.Name, Epoch: t.Epoch}
	if rec.URL == "" {
		rec.URL = req.URL
	}
	if _, err := js.Record(t.Job.ID, req.URL, rec); err != nil {
		return d, err
	}
	d.StatusCode, d.Bytes, d.DurationMS = page.StatusCode, page.Bytes, page.DurationMS
	d.Response = page.Title
	if page.Error != "" {
		d.State, d.ErrorMsg = roles.TaskError, page.Error
	}
	return d, nil
}
