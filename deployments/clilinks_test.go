package deployments_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// workerOnlyModules are libraries only the worker uses: the baton CLI
// must not link them, as every package a binary links is initialised at
// each start, before the command runs (a one-page `crawl --wait` pays it
// on every call). Each is reached through a package the CLI imports for
// its types; the package keeps the library behind an interface the
// worker fills.
var workerOnlyModules = []struct{ path, why string }{
	{"github.com/prometheus/", "the worker's /metrics (activities/telemetry/prommetrics)"},
}

// TestCLILinksNoWorkerLibraries fails when the baton binary (./starter)
// links a library of workerOnlyModules again, naming the import chain
// that brings it in.
func TestCLILinksNoWorkerLibraries(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./starter")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./starter: %v\n%s", err, stderr.String())
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		imports[f[0]] = f[1:]
	}
	for _, m := range workerOnlyModules {
		if chain := importChain(imports, "github.com/batoncrawl/baton/starter", m.path); chain != nil {
			t.Errorf("the baton CLI links %s, %s: %s", chain[len(chain)-1], m.why, strings.Join(chain, " -> "))
		}
	}
}

// importChain is a shortest import chain from root to a package whose
// path starts with prefix, or nil when none is linked.
func importChain(imports map[string][]string, root, prefix string) []string {
	from := map[string]string{root: ""}
	for queue := []string{root}; len(queue) > 0; queue = queue[1:] {
		p := queue[0]
		if strings.HasPrefix(p, prefix) {
			var chain []string
			for ; p != ""; p = from[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		for _, q := range imports[p] {
			if _, seen := from[q]; !seen {
				from[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}
