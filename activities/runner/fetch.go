package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/roles"
)

// fetched is the outcome of fetching one request of a plain Task.
type fetched struct {
	d   roles.ResultDetail
	err error
}

// fetchRequest runs request i of a plain Task through the Fetcher, with
// the Task's cookies and authorization and the Runner's Options. An
// invalid request becomes a failed result that names the node and index.
func (a *Activities) fetchRequest(ctx context.Context, owner string, t roles.Task, i int) fetched {
	req := t.RunningContent[i]
	if err := req.Validate(); err != nil {
		d := roles.ResultDetail{TaskID: req.TaskID, State: roles.TaskError, URL: req.URL,
			ErrorMsg: fmt.Sprintf("node %s task: running_content[%d]: %v", owner, i, err)}
		a.Deps.Metrics.PageError("")
		a.Deps.Logger(ctx).Warn("invalid request recorded as failed", "task_id", req.TaskID, "err", d.ErrorMsg)
		return fetched{d: d}
	}
	if a.Fetcher == nil {
		return fetched{err: errors.New("run task: no fetcher configured")}
	}
	p := a.Fetcher.Fetch(ctx, req, crawl.AuthOf(t), 0, a.Options)
	if ctx.Err() != nil {
		return fetched{err: ctx.Err()}
	}
	d := detailOf(req, p)
	a.Deps.Metrics.Page("", p.StatusCode, d.State == roles.TaskError, p.Bytes, time.Duration(p.DurationMS)*time.Millisecond)
	a.Deps.Metrics.Retries("", p.Attempts)
	if p.Disallowed {
		a.Deps.Metrics.RobotsRefusal("")
	}
	return fetched{d: d}
}

// detailOf is the result of request req, which the Fetcher saw as p: the
// page's title is the response. An HTTP error status is the Runner's to
// judge (the request failed, "HTTP 404"); any other error is the fetch's
// own (refused, timed out, too large, disallowed by robots.txt), recorded
// as the Fetcher said it.
func detailOf(req roles.Request, p crawl.Page) roles.ResultDetail {
	d := roles.ResultDetail{TaskID: req.TaskID, State: roles.TaskDone, StatusCode: p.StatusCode, URL: req.URL,
		Response: p.Title, Bytes: p.Bytes, DurationMS: p.DurationMS}
	status := fmt.Sprintf("HTTP %d", p.StatusCode)
	switch {
	case p.Error != "" && p.Error != status:
		d.State, d.ErrorMsg = roles.TaskError, p.Error
	case p.StatusCode >= 400:
		d.State, d.ErrorMsg = roles.TaskError, status
	}
	return d
}
