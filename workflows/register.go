package workflows

import "go.temporal.io/sdk/worker"

// Register registers every Baton workflow on w.
func Register(w worker.WorkflowRegistry) {
	w.RegisterWorkflow(Lifecycle)
	w.RegisterWorkflow(Runner)
	w.RegisterWorkflow(PrimaryBackup)
	w.RegisterWorkflow(SecondaryBackup)
	w.RegisterWorkflow(Heartbeat)
	w.RegisterWorkflow(CrawlJob)
	w.RegisterWorkflow(ScheduledCrawl)
}
