package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// crawlTemplate holds the crawl flags of `baton schedule create`: the job
// every firing submits, as `baton crawl` with the same flags would. They
// are `baton crawl`'s own flag groups (crawlFlags.addSpecFlags), and the
// job is built by the same code (crawlFlags.submissionFor).
type crawlTemplate struct{ cf crawlFlags }

// scheduleRefusals are `baton crawl` flags a schedule refuses, with why.
var scheduleRefusals = map[string]string{
	"cookie":        "a schedule's job is stored in the Temporal schedule, which the Web UI shows: it carries no credentials",
	"authorization": "a schedule's job is stored in the Temporal schedule, which the Web UI shows: it carries no credentials",
	"header":        "headers are sealed as secrets, and a schedule's job carries none (it is stored in the Temporal schedule, which the Web UI shows)",
	"cookie-file":   "a schedule's job carries no credentials",
	"auth-file":     "a schedule's job carries no credentials",
	"header-file":   "a schedule's job carries no secrets (headers are sealed as secrets)",
	"seeds-file":    "a seeds file is read where the command runs, not at each firing: give the seeds as arguments or --sitemap",
}

// add registers `baton crawl`'s flags of what a job crawls and how; the
// refused ones are hidden, taken only to be refused by name.
func (ct *crawlTemplate) add(f *pflag.FlagSet) {
	ct.cf.def = crawl.DefaultOptions()
	ct.cf.addSpecFlags(f)
	for name, why := range scheduleRefusals {
		if f.Lookup(name) == nil {
			f.String(name, "", "refused: "+why)
		}
		_ = f.MarkHidden(name)
	}
}

// spec builds the job template of the schedule's firings from the flags and
// seeds, checked as `baton crawl` checks its job (its ID is a placeholder:
// each firing names its job). Flags that would put a secret into the
// template are refused.
func (ct *crawlTemplate) spec(cmd *cobra.Command, g *globals, name string, seeds []string) (jobs.Spec, error) {
	for flag := range scheduleRefusals {
		if cmd.Flags().Changed(flag) {
			return jobs.Spec{}, usage("--%s: a schedule does not take it: %s", flag, scheduleRefusals[flag])
		}
	}
	if ct.cf.proxy != "" && os.Getenv(EnvProxyCredentials) != "" {
		return jobs.Spec{}, usage("--proxy with $%s: a schedule's job carries no credentials (it is stored in the Temporal schedule)", EnvProxyCredentials)
	}
	if len(seeds) == 0 && len(ct.cf.sitemaps) == 0 {
		return jobs.Spec{}, usage("no seeds: give seed URLs or --sitemap")
	}
	sub, _, err := ct.cf.submissionFor(cmd, g, seeds, nil)
	if err != nil {
		return jobs.Spec{}, err
	}
	sub.ID = scheduleTemplateID(name)
	plan, err := sub.Build()
	if err != nil {
		return jobs.Spec{}, submitError(err)
	}
	if !plan.Secrets.Empty() {
		return jobs.Spec{}, usage("a schedule's job carries no secrets: %s", strings.Join(plan.Spec.Secrets, ", "))
	}
	if plan.Spec.SeedsStored > 0 {
		return jobs.Spec{}, usage("--sitemap robots with stored seeds: give the sitemaps' URLs")
	}
	return plan.Spec, nil
}

// scheduleTemplateID is the placeholder ID of a schedule's job template
// (a valid ID of the length of the jobs' names; each firing sets its own).
func scheduleTemplateID(name string) string { return name + "-" + strings.Repeat("0", 8) + "T000000Z" }

// scheduleMemo is the memo `baton crawl` gives a job's workflow, for the
// schedule's jobs.
func scheduleMemo(spec jobs.Spec) map[string]any {
	memo := map[string]any{"seeds": spec.Seeds, "follow": spec.Options.Follow, "depth": spec.Options.MaxDepth,
		"max_pages": spec.MaxPages, "selectors": spec.Options.Selectors}
	if len(spec.Sitemaps) > 0 {
		memo["sitemaps"] = spec.Sitemaps
	}
	return memo
}
