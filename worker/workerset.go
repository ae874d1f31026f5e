package worker

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/batoncrawl/baton/workflows"
)

// workerSet is the worker's Temporal workers, one per task queue, each
// with every workflow and the activities acts. The instance's own queue
// is served from the start; the group's job queue once the instance is a
// Runner (startLater): a Backup polls no queue it has no work on, so a
// group of many Backups costs Temporal's server and each process no idle
// pollers.
type workerSet struct {
	tc      client.Client
	log     *slog.Logger
	leaving *atomic.Bool
	acts    []any

	mu      sync.Mutex
	workers map[string]worker.Worker
	pending map[string]bool // queues startLater is starting
	stopped bool
}

// start starts a Temporal worker on queue unless one runs there.
func (ws *workerSet) start(queue string) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.stopped || ws.workers[queue] != nil {
		return nil
	}
	// A restarted instance gets its workflow tasks back quickly: after a
	// crash, the sticky queue of the dead process is given up after 2 s.
	opts := worker.Options{WorkerStopTimeout: 3 * time.Second, StickyScheduleToStartTimeout: 2 * time.Second,
		Interceptors: []interceptor.WorkerInterceptor{&stopInterceptor{leaving: ws.leaving}}}
	if fi := newFaultInterceptor(ws.log); fi != nil {
		opts.Interceptors = append(opts.Interceptors, fi)
	}
	w := worker.New(ws.tc, queue, opts)
	workflows.Register(w)
	for _, a := range ws.acts {
		w.RegisterActivity(a)
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on %s: %w", queue, err)
	}
	if ws.workers == nil {
		ws.workers = map[string]worker.Worker{}
	}
	ws.workers[queue] = w
	return nil
}

// startLater starts a worker on queue in the background, once: it is
// called from activities, which must not wait for it. A start that fails
// is logged and tried again at the next call.
func (ws *workerSet) startLater(queue string) {
	ws.mu.Lock()
	if ws.stopped || ws.workers[queue] != nil || ws.pending[queue] {
		ws.mu.Unlock()
		return
	}
	if ws.pending == nil {
		ws.pending = map[string]bool{}
	}
	ws.pending[queue] = true
	ws.mu.Unlock()
	go func() {
		err := ws.start(queue)
		ws.mu.Lock()
		delete(ws.pending, queue)
		ws.mu.Unlock()
		if err != nil {
			ws.log.Error("could not serve the group's job queue; trying again at the next dispatch", "task_queue", queue, "err", err)
			return
		}
		ws.log.Info("serving the group's job queue", "task_queue", queue)
	}()
}

// stop stops the workers started (once); none starts after it. The
// workers stop outside the lock: an activity they wait for may call
// startLater meanwhile.
func (ws *workerSet) stop() {
	ws.mu.Lock()
	running := ws.workers
	ws.workers, ws.stopped = nil, true
	ws.mu.Unlock()
	for _, w := range running {
		w.Stop()
	}
}
