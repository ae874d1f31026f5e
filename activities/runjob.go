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
// in the Task znode. The recording is returned as commit, for the caller to
// run while it fetches the next page.
func (a *Activities) jobRequest(ctx context.Context, m Member, t roles.Task, req roles.Request, resumed bool) (roles.ResultDetail, func() error, error) {
	js, err := a.jobs()
	if err != nil {
		return roles.ResultDetail{}, nil, err
	}
	if a.Pages == nil {
		return roles.ResultDetail{}, nil, errors.New("run job task: no page fetcher configured")
	}
	spec, err := a.jobSpec(js, t.Job.ID)
	if err != nil {
		return roles.ResultDetail{}, nil, fmt.Errorf("run job task: %w", err)
	}
	opts := spec.Options
	if len(t.Job.Options) > 0 {
		if err := json.Unmarshal(t.Job.Options, &opts); err != nil {
			return roles.ResultDetail{}, nil, fmt.Errorf("task job.options: %w", err)
		}
	}
	d := roles.ResultDetail{TaskID: req.TaskID, URL: req.URL, State: roles.TaskDone}
	if resumed {
		// A holder before us may have recorded it without advancing
		// next_index: do not fetch it again.
		if done, err := js.Recorded(t.Job.ID, req.URL); err != nil {
			return d, nil, err
		} else if done {
			d.Response = "recorded before"
			return d, nil, nil
		}
	}
	page := a.Pages.Fetch(ctx, req, crawl.Auth{Cookie: t.Cookie, Authorization: t.Authorization}, req.Depth, opts)
	if ctx.Err() != nil {
		return d, nil, ctx.Err()
	}
	if page.Disallowed {
		a.Metrics.PageError() // refused by robots.txt: not fetched, not timed
	} else {
		a.Metrics.Page(page.StatusCode, page.Error != "", page.Bytes, time.Duration(page.DurationMS)*time.Millisecond)
	}
	entries := make([]jobstore.Entry, 0, len(page.Links))
	for _, l := range page.Links {
		entries = append(entries, jobstore.Entry{URL: l, Depth: req.Depth + 1})
	}
	if page.Disallowed {
		// Not fetched, so not a page of the results; the Task keeps the reason.
		d.State, d.ErrorMsg = roles.TaskTerminate, page.Error
		return d, nil, nil
	}
	rec := PageRecord{Page: page, Job: t.Job.ID, Batch: t.Job.Batch, Runner: m.Name, Epoch: t.Epoch}
	if rec.URL == "" {
		rec.URL = req.URL
	}
	commit := func() error {
		_, _, err := js.RecordWithLinks(t.Job.ID, req.URL, rec, entries, spec.MaxPages)
		return err
	}
	d.StatusCode, d.Bytes, d.DurationMS = page.StatusCode, page.Bytes, page.DurationMS
	d.Response = page.Title
	if page.Error != "" {
		d.State, d.ErrorMsg = roles.TaskError, page.Error
	}
	return d, commit, nil
}

// jobSpec reads a job's spec once per worker (it never changes).
func (a *Activities) jobSpec(js *jobstore.Store, id string) (JobSpec, error) {
	if v, ok := a.specs.Load(id); ok {
		return v.(JobSpec), nil
	}
	var spec JobSpec
	if err := js.Meta(id, &spec); err != nil {
		return spec, err
	}
	a.specs.Store(id, spec)
	return spec, nil
}
