package testsuite_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
	"github.com/batoncrawl/baton/workflows"
)

// The group's job queue is polled by its Runners only: a Backup, which has
// no crawl work until it takes a Task over, polls its own queue and not
// the job queue; once it has taken a dead Runner's place it polls the job
// queue too.
func TestJobQueuePolledByRunnersOnly(t *testing.T) {
	c := testsuite.NewCluster(t, 1, 1, testsuite.FastTimers)
	c.StartAll()
	c.WaitElected(electTimeout)
	tc := c.Temporal.Client(t)
	runner, backup := c.Process(1).Pid(), c.Process(2).Pid()
	jobQueue := workflows.JobQueue(c.Group)

	// Both processes start their workers at once; by the time the
	// Backup polls its own queue and the Runner the job queue, a Backup
	// polling the job queue would be listed too.
	testsuite.Eventually(t, 30*time.Second, "the Backup to poll its own queue and the Runner the job queue", func() (bool, error) {
		own := pollerPids(t, tc, workflows.TaskQueue(c.Group, testsuite.Name(2)))
		jobs := pollerPids(t, tc, jobQueue)
		return own[backup] && jobs[runner], fmt.Errorf("own queue pollers %v, job queue pollers %v", own, jobs)
	})
	if jobs := pollerPids(t, tc, jobQueue); jobs[backup] {
		t.Fatalf("the Backup (pid %d) polls the job queue %s: pollers %v", backup, jobQueue, jobs)
	}

	c.Kill(1)
	c.WaitRoles(30*time.Second, map[int]roles.Role{2: roles.RoleRunner})
	testsuite.Eventually(t, 30*time.Second, "the Backup that took over to poll the job queue", func() (bool, error) {
		jobs := pollerPids(t, tc, jobQueue)
		return jobs[backup], fmt.Errorf("job queue pollers %v", jobs)
	})
}

// pollerPids returns the processes polling queue for workflow or activity
// tasks, by the pid that starts the SDK's worker identity (pid@host@).
func pollerPids(t *testing.T, tc client.Client, queue string) map[int]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pids := map[int]bool{}
	for _, typ := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		resp, err := tc.DescribeTaskQueue(ctx, queue, typ)
		if err != nil {
			t.Fatalf("describe task queue %s: %v", queue, err)
		}
		for _, p := range resp.GetPollers() {
			pid, _, _ := strings.Cut(p.GetIdentity(), "@")
			if n, err := strconv.Atoi(pid); err == nil {
				pids[n] = true
			}
		}
	}
	return pids
}
