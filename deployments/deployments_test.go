// Package deployments_test checks the production deployment files without
// Docker or a Kubernetes cluster: every YAML file parses; the compose file
// has Temporal (PostgreSQL, UI, search attributes), a ZooKeeper ensemble,
// Baton's own PostgreSQL job store and a Baton group whose workers are
// configured alike, add up and share that store (and no volume); the
// Kubernetes manifests are well-formed resources whose StatefulSet replicas
// equal BATON_RUNNER + BATON_BACKUP, with the job store's PostgreSQL on its
// own volume and no ReadWriteMany claim; the Dockerfile builds both
// binaries; and no secret is passed on a command line, in a DSN or in a
// ConfigMap. security_test.go holds them, and the local stack, to secure
// defaults (ZooKeeper authentication enforced, secrets from files,
// hardened containers, pinned images, network policies, TLS to the job
// store). layers_test.go holds the whole module to its layers (no
// package imports one above it, nor its parent unless that parent is a
// library it builds on; no import cycle; no product file over 600 lines)
// and checks that the build's -X flags name a variable that exists.
// temporal_test.go holds the local stack's, Compose's and the tests'
// Temporal servers to the same tuning (eager activities, the transfer
// queue's read rate).
//
// Each check returns the problems it finds, so TestChecksCatchBrokenFiles
// can show that it fails on broken copies of the files, and
// TestLayerChecksCatchBrokenGraphs on broken copies of the import graph.
package deployments_test

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const (
	dockerfilePath    = "docker/Dockerfile"
	composePath       = "compose/docker-compose.yml"
	k8sDir            = "k8s"
	kustomizationFile = "kustomization.yaml"
	metricsPort       = 9090
	// postgresPort and postgresDataDir are the postgres image's defaults.
	postgresPort    = "5432"
	postgresDataDir = "/var/lib/postgresql/data"
)

// searchAttributes are Baton's custom search attributes (testsuite.SearchAttributes).
var searchAttributes = []string{"BatonCluster", "BatonCrawler", "BatonRole", "BatonJob"}

// ------------------------------------------------------------------ tests

func TestEveryYAMLFileParses(t *testing.T) {
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yml") || strings.HasSuffix(path, ".yaml")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{composePath, filepath.Join(k8sDir, kustomizationFile)} {
		if !slices.Contains(files, want) {
			t.Errorf("%s is missing (found %v)", want, files)
		}
	}
	for _, f := range files {
		docs, err := decodeFile(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(docs) == 0 {
			t.Errorf("%s: no YAML document", f)
		}
		for i, d := range docs {
			if len(d) == 0 {
				t.Errorf("%s: document %d is empty", f, i+1)
			}
		}
	}
}

func TestDockerfile(t *testing.T) {
	report(t, dockerfilePath, checkDockerfile(readText(t, dockerfilePath), goVersion(t)))
}

func TestCompose(t *testing.T) {
	report(t, composePath, checkCompose(loadOne(t, composePath)))
}

func TestKubernetes(t *testing.T) {
	report(t, k8sDir, checkK8s(loadK8s(t)))
}

func TestNoSecretOnCommandLines(t *testing.T) {
	report(t, composePath, checkComposeCommandLines(loadOne(t, composePath)))
	report(t, k8sDir, checkK8sCommandLines(loadK8s(t)))
	report(t, dockerfilePath, checkDockerfileSecrets(readText(t, dockerfilePath)))
}

// The checks fail on broken copies of the files: they assert content, not
// merely that something parses.
func TestChecksCatchBrokenFiles(t *testing.T) {
	gov := goVersion(t)
	dockerfile := readText(t, dockerfilePath)
	if p := checkDockerfile(dockerfile, gov); len(p) > 0 {
		t.Fatalf("the real Dockerfile must pass first: %v", p)
	}
	dockerCases := map[string]string{
		"starter not built":  strings.ReplaceAll(dockerfile, "./starter", "./other"),
		"worker not built":   strings.ReplaceAll(dockerfile, "./worker/cmd/baton-worker", "./other"),
		"old Go":             strings.ReplaceAll(dockerfile, "GO_VERSION=1.26", "GO_VERSION=1.21"),
		"runs as root":       regexp.MustCompile(`(?m)^USER .*$`).ReplaceAllString(dockerfile, "USER root"),
		"single stage":       keepFirstStage(dockerfile),
		"fat runtime":        strings.ReplaceAll(dockerfile, "debian:bookworm-slim", "ubuntu:24.04"),
		"secret build arg":   dockerfile + "\nARG ZK_PASSWORD=hunter2\n",
		"no binary in image": regexp.MustCompile(`(?m)^COPY --from=.*$`).ReplaceAllString(dockerfile, ""),
	}
	for name, text := range dockerCases {
		expectProblems(t, "Dockerfile "+name, append(checkDockerfile(text, gov), checkDockerfileSecrets(text)...))
	}

	composeCases := map[string]func(c map[string]any){
		"worker without ZooKeeper hosts": func(c map[string]any) { delete(workerEnv(c, "sc-crawler-2"), "BATON_ZK_HOSTS") },
		"ZooKeeper hosts miss a server": func(c map[string]any) {
			workerEnv(c, "sc-crawler-1")["BATON_ZK_HOSTS"] = "zk1:2181,zk2:2181"
		},
		"worker count != runner+backup": func(c map[string]any) { delete(mapAt(c, "services"), "sc-crawler-3") },
		"unequal group sizes":           func(c map[string]any) { workerEnv(c, "sc-crawler-3")["BATON_BACKUP"] = "2" },
		"duplicate crawler name":        func(c map[string]any) { workerEnv(c, "sc-crawler-3")["BATON_NAME"] = "sc-crawler_1" },
		"workers share a data volume": func(c map[string]any) {
			mapAt(c, "services", "sc-crawler-1")["volumes"] = []any{"shared:/data"}
			mapAt(c, "services", "sc-crawler-2")["volumes"] = []any{map[string]any{"type": "volume", "source": "shared", "target": "/data"}}
		},
		"worker without a store": func(c map[string]any) { delete(workerEnv(c, "sc-crawler-2"), "BATON_STORE") },
		"workers on two stores": func(c map[string]any) {
			workerEnv(c, "sc-crawler-3")["BATON_STORE"] = "postgres://baton@baton-db:5432/other?sslmode=disable"
		},
		"store is SQLite": func(c map[string]any) { workerEnv(c, "sc-crawler-1")["BATON_STORE"] = "sqlite" },
		"store on Temporal's DB": func(c map[string]any) {
			setComposeStore(c, "postgres://temporal@postgresql:5432/baton?sslmode=disable")
		},
		"store host not a service": func(c map[string]any) { setComposeStore(c, "postgres://baton@db.example.org:5432/baton") },
		"store on the wrong port":  func(c map[string]any) { setComposeStore(c, "postgres://baton@baton-db:5433/baton?sslmode=disable") },
		"store user is not the DB's": func(c map[string]any) {
			setComposeStore(c, "postgres://crawler@baton-db:5432/baton?sslmode=disable")
		},
		"password in the store DSN": func(c map[string]any) {
			setComposeStore(c, "postgres://baton:hunter2@baton-db:5432/baton?sslmode=disable")
		},
		"store password differs": func(c map[string]any) {
			workerEnv(c, "sc-crawler-2")["BATON_STORE_PASSWORD_FILE"] = "/run/secrets/secrets-key"
		},
		"no store password": func(c map[string]any) { delete(workerEnv(c, "sc-crawler-1"), "BATON_STORE_PASSWORD_FILE") },
		"store password in the environment": func(c map[string]any) {
			mapAt(c, "services", "baton-db", "environment")["POSTGRES_PASSWORD"] = "baton"
		},
		"store on the default network": func(c map[string]any) { mapAt(c, "services", "baton-db")["networks"] = []any{"default"} },
		"another service on the store's network": func(c map[string]any) {
			mapAt(c, "services", "temporal")["networks"] = []any{"default", "baton-store"}
		},
		"store not waited for": func(c map[string]any) {
			mapAt(c, "services", "sc-crawler-1", "depends_on", "baton-db")["condition"] = "service_started"
		},
		"store without healthcheck": func(c map[string]any) { delete(mapAt(c, "services", "baton-db"), "healthcheck") },
		"store shares Temporal's volume": func(c map[string]any) {
			mapAt(c, "services", "baton-db")["volumes"] = []any{"temporal-db:/var/lib/postgresql/data"}
		},
		"store without a volume": func(c map[string]any) { delete(mapAt(c, "services", "baton-db"), "volumes") },
		"CLI without the store":  func(c map[string]any) { delete(mapAt(c, "services", "baton", "environment"), "BATON_STORE") },
		"concurrency 0":          func(c map[string]any) { workerEnv(c, "sc-crawler-1")["BATON_CONCURRENCY"] = "0" },
		"no UI":                  func(c map[string]any) { delete(mapAt(c, "services"), "temporal-ui") },
		"a search attribute missing": func(c map[string]any) {
			s := mapAt(c, "services", "temporal-admin-tools")
			s["command"] = strings.ReplaceAll(fmt.Sprint(s["command"]), "BatonJob", "")
		},
		"two servers with one myid": func(c map[string]any) { mapAt(c, "services", "zk3", "environment")["ZOO_MY_ID"] = "1" },
		"password on a command line": func(c map[string]any) {
			mapAt(c, "services", "sc-crawler-1")["command"] = []any{"--zk-auth", "baton:hunter2"}
		},
	}
	for name, mutate := range composeCases {
		c := loadOne(t, composePath)
		mutate(c)
		expectProblems(t, "compose "+name, append(checkCompose(c), checkComposeCommandLines(c)...))
	}

	k8sCases := map[string]func(m *k8sSet){
		"replicas != runner+backup": func(m *k8sSet) { mapAt(m.find("StatefulSet", "baton"), "spec")["replicas"] = 4 },
		"runner changed alone": func(m *k8sSet) {
			for _, e := range sliceAt(container(m.find("StatefulSet", "baton")), "env") {
				if e := e.(map[string]any); e["name"] == "BATON_RUNNER" {
					e["value"] = "3"
				}
			}
		},
		"no metadata.name": func(m *k8sSet) { delete(mapAt(m.find("ConfigMap", "baton-config"), "metadata"), "name") },
		"no readiness on metrics": func(m *k8sSet) {
			container(m.find("StatefulSet", "baton"))["readinessProbe"] = map[string]any{"tcpSocket": map[string]any{"port": 8080}}
		},
		"name not derived from the pod": func(m *k8sSet) {
			container(m.find("StatefulSet", "baton"))["args"] = []any{"exec baton-worker"}
		},
		"ensemble of 2": func(m *k8sSet) { mapAt(m.find("StatefulSet", "zk"), "spec")["replicas"] = 2 },
		"no PDB":        func(m *k8sSet) { m.drop("PodDisruptionBudget", "zk-pdb") },
		"secret as env": func(m *k8sSet) {
			c := container(m.find("StatefulSet", "baton"))
			c["env"] = append(sliceAt(c, "env"), map[string]any{"name": "BATON_ZK_AUTH",
				"valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "baton-secrets", "key": "zk-auth"}}})
		},
		"secret file not mounted": func(m *k8sSet) {
			c := container(m.find("StatefulSet", "baton"))
			var keep []any
			for _, v := range sliceAt(c, "volumeMounts") {
				if v.(map[string]any)["name"] != "secrets" {
					keep = append(keep, v)
				}
			}
			c["volumeMounts"] = keep
		},
		"resource not in kustomization": func(m *k8sSet) {
			k := m.kustomization
			k["resources"] = slices.DeleteFunc(slices.Clone(sliceAt(k, "resources")), func(v any) bool { return v == "zookeeper.yaml" })
		},
		"store not in kustomization": func(m *k8sSet) {
			k := m.kustomization
			k["resources"] = slices.DeleteFunc(slices.Clone(sliceAt(k, "resources")), func(v any) bool { return v == "postgres.yaml" })
		},
		"a ReadWriteMany claim": func(m *k8sSet) {
			m.files["baton.yaml"] = append(m.files["baton.yaml"], map[string]any{
				"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": map[string]any{"name": "baton-data"},
				"spec": map[string]any{"accessModes": []any{"ReadWriteMany"}}})
		},
		"workers mount a claim": func(m *k8sSet) {
			ps := mapAt(m.find("StatefulSet", "baton"), "spec", "template", "spec")
			ps["volumes"] = append(sliceAt(ps, "volumes"), map[string]any{"name": "data",
				"persistentVolumeClaim": map[string]any{"claimName": "baton-data"}})
			c := container(m.find("StatefulSet", "baton"))
			c["volumeMounts"] = append(sliceAt(c, "volumeMounts"), map[string]any{"name": "data", "mountPath": "/data"})
		},
		"no store":              func(m *k8sSet) { delete(mapAt(m.find("ConfigMap", "baton-config"), "data"), "BATON_STORE") },
		"store is SQLite":       func(m *k8sSet) { mapAt(m.find("ConfigMap", "baton-config"), "data")["BATON_STORE"] = "" },
		"store on Temporal":     func(m *k8sSet) { setK8sStore(m, "postgres://temporal@temporal-postgresql.temporal:5432/baton") },
		"store host no Service": func(m *k8sSet) { setK8sStore(m, "postgres://baton@baton-pg:5432/baton?sslmode=disable") },
		"store in another namespace": func(m *k8sSet) {
			setK8sStore(m, "postgres://baton@baton-db.other.svc.cluster.local:5432/baton?sslmode=disable")
		},
		"store database is not the DB's": func(m *k8sSet) { setK8sStore(m, "postgres://baton@baton-db:5432/postgres?sslmode=disable") },
		"password in the store DSN": func(m *k8sSet) {
			setK8sStore(m, "postgres://baton:CHANGE-ME-store@baton-db:5432/baton?sslmode=disable")
		},
		"store password in the ConfigMap": func(m *k8sSet) {
			mapAt(m.find("ConfigMap", "baton-config"), "data")["BATON_STORE_PASSWORD"] = "hunter2hunter2"
		},
		"a Secret's value in the ConfigMap": func(m *k8sSet) {
			g := asMap(sliceAt(m.kustomization, "secretGenerator")[0])
			g["literals"] = []any{"note=CHANGE-ME-store"}
			mapAt(m.find("ConfigMap", "baton-config"), "data")["BATON_NOTE"] = "CHANGE-ME-store"
		},
		"no store password file": func(m *k8sSet) {
			delete(mapAt(m.find("ConfigMap", "baton-config"), "data"), "BATON_STORE_PASSWORD_FILE")
		},
		"store password key missing": func(m *k8sSet) {
			g := asMap(sliceAt(m.kustomization, "secretGenerator")[0])
			g["files"] = slices.DeleteFunc(slices.Clone(sliceAt(g, "files")), func(v any) bool {
				return strings.HasPrefix(str(v), "store-password=")
			})
		},
		"PostgreSQL reads another password": func(m *k8sSet) {
			for _, v := range sliceAt(mapAt(m.find("StatefulSet", "baton-db"), "spec", "template", "spec"), "volumes") {
				if s := asMap(asMap(v)["secret"]); s != nil {
					s["items"] = []any{map[string]any{"key": "zk-auth", "path": "password"}}
				}
			}
		},
		"store Service selects nothing": func(m *k8sSet) {
			mapAt(m.find("Service", "baton-db"), "spec")["selector"] = map[string]any{"app.kubernetes.io/name": "nothing"}
		},
		"store Service without its port": func(m *k8sSet) {
			mapAt(m.find("Service", "baton-db"), "spec")["ports"] = []any{map[string]any{"name": "postgres", "port": 5433}}
		},
		"two PostgreSQL replicas": func(m *k8sSet) { mapAt(m.find("StatefulSet", "baton-db"), "spec")["replicas"] = 2 },
		"no pg_isready readiness": func(m *k8sSet) { delete(container(m.find("StatefulSet", "baton-db")), "readinessProbe") },
		"PostgreSQL data on emptyDir": func(m *k8sSet) {
			sts := m.find("StatefulSet", "baton-db")
			delete(mapAt(sts, "spec"), "volumeClaimTemplates")
			ps := mapAt(sts, "spec", "template", "spec")
			ps["volumes"] = append(sliceAt(ps, "volumes"), map[string]any{"name": "data", "emptyDir": map[string]any{}})
		},
		"PostgreSQL data not on its volume": func(m *k8sSet) {
			for _, e := range sliceAt(container(m.find("StatefulSet", "baton-db")), "env") {
				if e := asMap(e); e["name"] == "PGDATA" {
					e["value"] = "/pgdata"
				}
			}
		},
		"password in args": func(m *k8sSet) {
			c := container(m.find("StatefulSet", "baton"))
			c["args"] = append(sliceAt(c, "args"), "--zk-auth=baton:CHANGE-ME")
		},
	}
	for name, mutate := range k8sCases {
		m := loadK8s(t)
		mutate(m)
		expectProblems(t, "k8s "+name, append(checkK8s(m), checkK8sCommandLines(m)...))
	}
}

// ------------------------------------------------------------------ Dockerfile

type dockerStage struct {
	from, name string
	lines      []string // instructions of the stage, continuation lines joined
}

// parseDockerfile returns the ARG defaults declared before the first FROM
// and the stages, with continuation lines joined and comments dropped.
func parseDockerfile(text string) (map[string]string, []dockerStage) {
	args := map[string]string{}
	var stages []dockerStage
	var logical []string
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		logical = append(logical, cur+trimmed)
		cur = ""
	}
	if cur != "" {
		logical = append(logical, cur)
	}
	for _, l := range logical {
		fields := strings.Fields(l)
		if len(fields) == 0 {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			st := dockerStage{}
			for i := 1; i < len(fields); i++ {
				switch {
				case strings.HasPrefix(fields[i], "--"):
				case st.from == "":
					st.from = fields[i]
				case strings.EqualFold(fields[i], "AS") && i+1 < len(fields):
					st.name = fields[i+1]
					i++
				}
			}
			stages = append(stages, st)
			continue
		case "ARG":
			if len(stages) == 0 && len(fields) > 1 {
				k, v, _ := strings.Cut(fields[1], "=")
				args[k] = v
			}
		}
		if len(stages) > 0 {
			stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, l)
		}
	}
	return args, stages
}

func expandArgs(s string, args map[string]string) string {
	for k, v := range args {
		s = strings.ReplaceAll(s, "${"+k+"}", v)
		s = strings.ReplaceAll(s, "$"+k, v)
	}
	return s
}

func checkDockerfile(text, goVersion string) []string {
	var p problems
	args, stages := parseDockerfile(text)
	if len(stages) < 2 {
		return p.add("want a multi-stage build (a builder and a runtime stage), found %d FROM lines", len(stages))
	}
	build, runtime := stages[0], stages[len(stages)-1]
	from := expandArgs(build.from, args)
	image, tag, _ := strings.Cut(from, ":")
	if image != "golang" && image != "docker.io/library/golang" {
		p.add("builder stage is FROM %s, want golang:%s", from, goVersion)
	}
	if tag != goVersion && !strings.HasPrefix(tag, goVersion+".") && !strings.HasPrefix(tag, goVersion+"-") {
		p.add("builder image golang:%s does not match go.mod's go %s", tag, goVersion)
	}
	if build.name == "" {
		p.add("builder stage has no name (FROM ... AS build)")
	}
	buildCmds := expandArgs(strings.Join(build.lines, "\n"), args)
	for _, pkg := range []string{"./worker/cmd/baton-worker", "./starter"} {
		if !regexp.MustCompile(`go build [^\n]*` + regexp.QuoteMeta(pkg) + `(\s|$|&|;)`).MatchString(buildCmds) {
			p.add("the builder does not `go build` %s", pkg)
		}
	}
	rt := expandArgs(runtime.from, args)
	if !strings.Contains(rt, "distroless") && !strings.Contains(rt, "slim") {
		p.add("runtime stage is FROM %s, want a distroless or debian-slim image", rt)
	}
	var user, entrypoint string
	copied := false
	for _, l := range runtime.lines {
		f := strings.Fields(l)
		switch strings.ToUpper(f[0]) {
		case "USER":
			user = f[1]
		case "ENTRYPOINT":
			entrypoint = l
		case "COPY":
			if len(f) > 1 && f[1] == "--from="+build.name && strings.Contains(l, "baton-worker") && strings.Contains(l, "baton ") {
				copied = true
			}
		}
	}
	if !copied {
		p.add("the runtime stage does not COPY --from=%s both binaries (baton-worker, baton)", build.name)
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "root" || uid == "0" {
		p.add("the runtime stage runs as %q, want a non-root USER", user)
	}
	if !strings.Contains(entrypoint, "baton-worker") {
		p.add("ENTRYPOINT %q does not run baton-worker", entrypoint)
	}
	return p
}

// secretWord matches names that suggest a secret value.
var secretWord = regexp.MustCompile(`(?i)(passw|secret|token|api[-_]?key|credential|private[-_]?key)`)

func checkDockerfileSecrets(text string) []string {
	var p problems
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) > 1 && (strings.EqualFold(f[0], "ARG") || strings.EqualFold(f[0], "ENV")) && secretWord.MatchString(f[1]) {
			p.add("%q: secrets must not be build arguments or baked into the image", l)
		}
	}
	return p
}

// keepFirstStage drops everything from the second FROM on.
func keepFirstStage(text string) string {
	idx := regexp.MustCompile(`(?m)^FROM `).FindAllStringIndex(text, -1)
	if len(idx) < 2 {
		return text
	}
	return text[:idx[1][0]]
}

// ------------------------------------------------------------------ compose

var crawlerName = regexp.MustCompile(`^sc-crawler_([1-9][0-9]*)$`)

func checkCompose(c map[string]any) []string {
	var p problems
	services := mapAt(c, "services")
	for _, name := range []string{"postgresql", "temporal", "temporal-ui", "temporal-admin-tools"} {
		if services[name] == nil {
			p.add("service %s is missing", name)
		}
	}
	if s := asMap(services["temporal"]); s != nil {
		env := envOf(s["environment"])
		if !strings.HasPrefix(str(s["image"]), "temporalio/auto-setup:") {
			p.add("temporal: image %q, want temporalio/auto-setup", s["image"])
		}
		if !strings.HasPrefix(env["DB"], "postgres") || services[env["POSTGRES_SEEDS"]] == nil {
			p.add("temporal: DB=%q POSTGRES_SEEDS=%q, want PostgreSQL from a service of this file", env["DB"], env["POSTGRES_SEEDS"])
		}
	}
	if s := asMap(services["postgresql"]); s != nil && !strings.HasPrefix(str(s["image"]), "postgres:") {
		p.add("postgresql: image %q", s["image"])
	}
	if s := asMap(services["temporal-ui"]); s != nil {
		if !strings.HasPrefix(str(s["image"]), "temporalio/ui:") || envOf(s["environment"])["TEMPORAL_ADDRESS"] != "temporal:7233" {
			p.add("temporal-ui: want temporalio/ui with TEMPORAL_ADDRESS=temporal:7233")
		}
	}
	if s := asMap(services["temporal-admin-tools"]); s != nil {
		script := flatten(s["entrypoint"]) + " " + flatten(s["command"])
		if !strings.HasPrefix(str(s["image"]), "temporalio/admin-tools:") {
			p.add("temporal-admin-tools: image %q", s["image"])
		}
		if !strings.Contains(script, "search-attribute create") || !strings.Contains(script, "Keyword") {
			p.add("temporal-admin-tools does not create Keyword search attributes")
		}
		for _, sa := range searchAttributes {
			if !regexp.MustCompile(`\b` + sa + `\b`).MatchString(script) {
				p.add("temporal-admin-tools does not register search attribute %s", sa)
			}
		}
	}

	// The ZooKeeper ensemble: every server has its own myid and knows all.
	var zks []string
	ids := map[string]string{}
	for name, v := range services {
		s := asMap(v)
		if !strings.HasPrefix(str(s["image"]), "zookeeper:") {
			continue
		}
		zks = append(zks, name)
		if str(s["image"]) != "zookeeper:3.8" {
			p.add("%s: image %q, want zookeeper:3.8", name, s["image"])
		}
		env := envOf(s["environment"])
		id := env["ZOO_MY_ID"]
		if id == "" {
			p.add("%s: no ZOO_MY_ID", name)
		} else if other, dup := ids[id]; dup {
			p.add("%s and %s have the same ZOO_MY_ID %s", other, name, id)
		}
		ids[id] = name
	}
	sort.Strings(zks)
	if len(zks) < 3 || len(zks)%2 == 0 {
		p.add("ZooKeeper services %v: want an ensemble of 3 (or another odd number >= 3)", zks)
	}
	for _, name := range zks {
		servers := envOf(asMap(services[name])["environment"])["ZOO_SERVERS"]
		for _, peer := range zks {
			id := envOf(asMap(services[peer])["environment"])["ZOO_MY_ID"]
			if !strings.Contains(" "+servers, fmt.Sprintf(" server.%s=%s:2888:3888", id, peer)) {
				p.add("%s: ZOO_SERVERS %q does not list server.%s=%s:2888:3888", name, servers, id, peer)
			}
		}
	}

	// The Baton group.
	var workers []string
	for name, v := range services {
		if _, ok := envOf(asMap(v)["environment"])["BATON_NAME"]; ok {
			workers = append(workers, name)
		}
	}
	sort.Strings(workers)
	if len(workers) == 0 {
		return p.add("no Baton worker (a service with BATON_NAME)")
	}
	required := []string{"BATON_NAME", "BATON_RUNNER", "BATON_BACKUP", "BATON_ZK_HOSTS", "BATON_TEMPORAL_ADDRESS", "BATON_STORE"}
	names := map[string]string{}
	var indexes []int
	sizes := map[string]bool{}
	stores := map[string]bool{}
	mountedBy := map[string][]string{} // volume (or host path) -> workers mounting it
	wantZK := make([]string, len(zks))
	for i, z := range zks {
		wantZK[i] = z + ":2181"
	}
	for _, w := range workers {
		s := asMap(services[w])
		env := envOf(s["environment"])
		for _, k := range required {
			if env[k] == "" {
				p.add("%s: %s is not set", w, k)
			}
		}
		if m := crawlerName.FindStringSubmatch(env["BATON_NAME"]); m == nil {
			p.add("%s: BATON_NAME %q, want sc-crawler_<index>", w, env["BATON_NAME"])
		} else {
			if other, dup := names[env["BATON_NAME"]]; dup {
				p.add("%s and %s are both %s", other, w, env["BATON_NAME"])
			}
			names[env["BATON_NAME"]] = w
			n, _ := strconv.Atoi(m[1])
			indexes = append(indexes, n)
		}
		runner, err1 := strconv.Atoi(env["BATON_RUNNER"])
		backup, err2 := strconv.Atoi(env["BATON_BACKUP"])
		if err1 != nil || err2 != nil || runner < 1 || backup < 0 {
			p.add("%s: BATON_RUNNER %q BATON_BACKUP %q", w, env["BATON_RUNNER"], env["BATON_BACKUP"])
		} else {
			sizes[fmt.Sprintf("%d+%d", runner, backup)] = true
			if runner+backup != len(workers) {
				p.add("%s: BATON_RUNNER %d + BATON_BACKUP %d != %d workers", w, runner, backup, len(workers))
			}
		}
		if hosts := strings.Split(env["BATON_ZK_HOSTS"], ","); !sameSet(hosts, wantZK) {
			p.add("%s: BATON_ZK_HOSTS %q, want every ZooKeeper server %v", w, env["BATON_ZK_HOSTS"], wantZK)
		}
		if env["BATON_TEMPORAL_ADDRESS"] != "temporal:7233" {
			p.add("%s: BATON_TEMPORAL_ADDRESS %q, want temporal:7233", w, env["BATON_TEMPORAL_ADDRESS"])
		}
		if port := addrPort(env["BATON_METRICS_ADDR"]); port != metricsPort {
			p.add("%s: BATON_METRICS_ADDR %q, want port %d reachable from outside (e.g. :%d)", w, env["BATON_METRICS_ADDR"], metricsPort, metricsPort)
		}
		if v, ok := env["BATON_CONCURRENCY"]; ok {
			if n, err := strconv.Atoi(v); err != nil || n < 1 {
				p.add("%s: BATON_CONCURRENCY %q, want a positive number", w, v)
			}
		}
		stores[env["BATON_STORE"]] = true
		for _, m := range composeMounts(s["volumes"]) {
			if m.source != "" {
				mountedBy[m.source] = append(mountedBy[m.source], w)
			}
		}
		deps := dependsOn(s["depends_on"])
		for _, z := range append(slices.Clone(zks), "temporal-admin-tools") {
			if !slices.Contains(deps, z) {
				p.add("%s: does not depend on %s", w, z)
			}
		}
		if b := asMap(s["build"]); b == nil || str(b["dockerfile"]) != "deployments/docker/Dockerfile" {
			p.add("%s: not built from deployments/docker/Dockerfile", w)
		} else if _, err := os.Stat(filepath.Join(filepath.Dir(composePath), str(b["context"]), "go.mod")); err != nil {
			p.add("%s: build context %q is not the repository root", w, b["context"])
		}
	}
	if len(sizes) > 1 {
		p.add("the workers disagree on the group size: %v", keys(sizes))
	}
	// The crawl data lives in the job store, not in files the workers share.
	for _, vol := range sortedKeys(mountedBy) {
		if len(mountedBy[vol]) > 1 {
			p.add("%v all mount %q: the workers share no volume (crawl data is in the job store)", mountedBy[vol], vol)
		}
	}
	if len(stores) != 1 {
		p.add("the workers do not share one job store (BATON_STORE): %v", keys(stores))
	}
	dbs := map[string]bool{} // the store servers, checked once each
	for _, w := range workers {
		host, sp := checkComposeStore(c, w)
		p, dbs[host] = append(p, sp...), host != ""
	}
	// The CLI service(s) read results from the same store.
	for _, name := range sortedKeys(services) {
		s := asMap(services[name])
		if !isBatonCLI(s) {
			continue
		}
		env, wenv := envOf(s["environment"]), envOf(asMap(services[workers[0]])["environment"])
		if env["BATON_STORE"] != wenv["BATON_STORE"] {
			p.add("%s (the CLI): BATON_STORE %q, want the workers' %q", name, redactURL(env["BATON_STORE"]), redactURL(wenv["BATON_STORE"]))
		}
		if env["BATON_STORE_PASSWORD_FILE"] != wenv["BATON_STORE_PASSWORD_FILE"] {
			p.add("%s (the CLI): BATON_STORE_PASSWORD_FILE is not the workers'", name)
		}
		host, sp := checkComposeStore(c, name)
		p, dbs[host] = append(p, sp...), host != ""
	}
	for _, host := range sortedKeys(dbs) {
		if dbs[host] {
			p = append(p, checkComposeStoreDB(c, host)...)
		}
	}
	slices.Sort(indexes)
	for i, n := range indexes {
		if n != i+1 {
			p.add("crawler indexes %v, want 1..%d", indexes, len(workers))
			break
		}
	}
	return p
}

// checkComposeStore checks that a service's BATON_STORE is Baton's own
// PostgreSQL service of this file (not Temporal's), without a password in
// the DSN, with the database's password in BATON_STORE_PASSWORD, and that
// the service starts after the database is healthy. It returns the
// database's service name once BATON_STORE names one.
func checkComposeStore(c map[string]any, name string) (string, []string) {
	var p problems
	services := mapAt(c, "services")
	s := asMap(services[name])
	env := envOf(s["environment"])
	u, err := url.Parse(env["BATON_STORE"])
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Hostname() == "" {
		return "", p.add("%s: BATON_STORE %q, want postgres://user@host:port/database (PostgreSQL: the workers share it)", name, redactURL(env["BATON_STORE"]))
	}
	if _, has := u.User.Password(); has {
		p.add("%s: BATON_STORE has a password in the DSN; put it in a secret file (BATON_STORE_PASSWORD_FILE)", name)
	}
	host := u.Hostname()
	db := asMap(services[host])
	temporalDB := envOf(asMap(services["temporal"])["environment"])["POSTGRES_SEEDS"]
	switch {
	case db == nil:
		return "", p.add("%s: BATON_STORE host %q is not a service of this file", name, host)
	case host == temporalDB:
		return "", p.add("%s: BATON_STORE is %s, Temporal's database; Baton's job store needs its own", name, host)
	case !strings.HasPrefix(str(db["image"]), "postgres:"):
		return "", p.add("%s: BATON_STORE host %s runs %q, want a postgres image", name, host, db["image"])
	}
	dbEnv := envOf(db["environment"])
	user := cmp.Or(dbEnv["POSTGRES_USER"], "postgres")
	database := cmp.Or(dbEnv["POSTGRES_DB"], user)
	if port := cmp.Or(u.Port(), postgresPort); port != postgresPort {
		p.add("%s: BATON_STORE port %s, want %s (%s's)", name, port, postgresPort, host)
	}
	if u.User.Username() != user || strings.TrimPrefix(u.Path, "/") != database {
		p.add("%s: BATON_STORE user %q database %q, want %s's %q %q", name, u.User.Username(), strings.TrimPrefix(u.Path, "/"), host, user, database)
	}
	if f := env["BATON_STORE_PASSWORD_FILE"]; f == "" || f != dbEnv["POSTGRES_PASSWORD_FILE"] || !givenSecretFile(s, f) || !givenSecretFile(db, f) {
		p.add("%s: BATON_STORE_PASSWORD_FILE %q is not %s's POSTGRES_PASSWORD_FILE, a secret both are given (make-secrets.sh makes it)", name, f, host)
	}
	if _, ok := dbEnv["POSTGRES_PASSWORD"]; ok {
		p.add("%s: POSTGRES_PASSWORD in the environment; give it as a secret file (POSTGRES_PASSWORD_FILE)", host)
	}
	p = append(p, checkStoreNetwork(c, host)...)
	if cond := str(mapAt(s, "depends_on", host)["condition"]); cond != "service_healthy" {
		p.add("%s: depends on %s with condition %q, want service_healthy", name, host, cond)
	}
	return host, p
}

// givenSecretFile reports whether a service is given the secret whose
// file is /run/secrets/<name>.
func givenSecretFile(s map[string]any, file string) bool {
	n, ok := strings.CutPrefix(file, "/run/secrets/")
	return ok && slices.Contains(strSlice(s["secrets"]), n)
}

// checkStoreNetwork checks that the store's service is only on internal
// networks that only Baton's containers (those with BATON_STORE) join.
func checkStoreNetwork(c map[string]any, host string) []string {
	var p problems
	services := mapAt(c, "services")
	nets := strSlice(asMap(services[host])["networks"])
	if len(nets) == 0 {
		return p.add("%s: on the default network; put it on an internal network of Baton's only", host)
	}
	for _, n := range nets {
		if internal, _ := mapAt(c, "networks", n)["internal"].(bool); !internal {
			p.add("%s: network %q is not internal: true", host, n)
		}
		for _, name := range sortedKeys(services) {
			s := asMap(services[name])
			if name != host && slices.Contains(strSlice(s["networks"]), n) && envOf(s["environment"])["BATON_STORE"] == "" {
				p.add("%s: on %s's network %q without being Baton", name, host, n)
			}
		}
	}
	return p
}

// strSlice is a YAML list of strings.
func strSlice(v any) []string {
	var out []string
	xs, _ := v.([]any)
	for _, x := range xs {
		out = append(out, str(x))
	}
	return out
}

// checkComposeStoreDB checks that the store's database service reports its
// health with pg_isready and keeps its data on a named volume of its own.
func checkComposeStoreDB(c map[string]any, host string) []string {
	var p problems
	services := mapAt(c, "services")
	db := asMap(services[host])
	dbEnv := envOf(db["environment"])
	if hc := asMap(db["healthcheck"]); !strings.Contains(flatten(hc["test"]), "pg_isready") {
		p.add("%s: no healthcheck with pg_isready", host)
	}
	dataDir := cmp.Or(dbEnv["PGDATA"], postgresDataDir)
	vol := ""
	for _, m := range composeMounts(db["volumes"]) {
		if dataDir == m.target || strings.HasPrefix(dataDir, m.target+"/") {
			vol = m.source
		}
	}
	if _, declared := mapAt(c, "volumes")[vol]; vol == "" || !declared {
		return p.add("%s: its data %s is not on a named volume of this file (%q)", host, dataDir, vol)
	}
	for _, other := range sortedKeys(services) {
		for _, m := range composeMounts(asMap(services[other])["volumes"]) {
			if other != host && m.source == vol {
				p.add("%s: its volume %s is also mounted by %s; it needs its own", host, vol, other)
			}
		}
	}
	return p
}

// redactURL hides a URL's password in messages.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return s
}

func checkComposeCommandLines(c map[string]any) []string {
	var p problems
	for name, v := range mapAt(c, "services") {
		s := asMap(v)
		for _, k := range []string{"entrypoint", "command"} {
			p = append(p, secretsInArgs("compose service "+name+" "+k, toStrings(s[k]), nil)...)
		}
	}
	return p
}

// ------------------------------------------------------------------ Kubernetes

type k8sSet struct {
	files         map[string][]map[string]any // k8s/<file> -> documents
	kustomization map[string]any
}

func (m *k8sSet) all() []map[string]any {
	var out []map[string]any
	for _, f := range sortedKeys(m.files) {
		out = append(out, m.files[f]...)
	}
	return out
}

func (m *k8sSet) find(kind, name string) map[string]any {
	for _, d := range m.all() {
		if d["kind"] == kind && mapAt(d, "metadata")["name"] == name {
			return d
		}
	}
	return nil
}

func (m *k8sSet) drop(kind, name string) {
	for f, docs := range m.files {
		m.files[f] = slices.DeleteFunc(docs, func(d map[string]any) bool {
			return d["kind"] == kind && mapAt(d, "metadata")["name"] == name
		})
	}
}

func checkK8s(m *k8sSet) []string {
	var p problems
	for _, f := range sortedKeys(m.files) {
		for i, d := range m.files[f] {
			meta := asMap(d["metadata"])
			if str(d["apiVersion"]) == "" || str(d["kind"]) == "" || meta == nil || str(meta["name"]) == "" {
				p.add("%s document %d: want apiVersion, kind and metadata.name (have %q %q %v)", f, i+1, d["apiVersion"], d["kind"], meta["name"])
			}
		}
	}
	var resources []string
	for _, r := range sliceAt(m.kustomization, "resources") {
		resources = append(resources, str(r))
	}
	if !sameSet(resources, sortedKeys(m.files)) {
		p.add("kustomization resources %v, want every manifest %v", resources, sortedKeys(m.files))
	}
	p = append(p, checkK8sNoRWX(m)...)
	p = append(p, checkK8sConfigMaps(m)...)
	for _, kind := range []string{"Namespace", "ConfigMap", "NetworkPolicy"} {
		found := false
		for _, d := range m.all() {
			found = found || d["kind"] == kind
		}
		if !found {
			p.add("no %s", kind)
		}
	}

	// ZooKeeper: 3 replicas behind a headless Service, with a PDB.
	zk := statefulSetWithImage(m, "zookeeper:")
	if zk == nil {
		return p.add("no ZooKeeper StatefulSet (image zookeeper:...)")
	}
	zkName := str(mapAt(zk, "metadata")["name"])
	zkReplicas := intOf(mapAt(zk, "spec")["replicas"])
	if zkReplicas != 3 {
		p.add("ZooKeeper StatefulSet %s has %d replicas, want 3", zkName, zkReplicas)
	}
	zkService := str(mapAt(zk, "spec")["serviceName"])
	if svc := m.find("Service", zkService); svc == nil || mapAt(svc, "spec")["clusterIP"] != "None" {
		p.add("ZooKeeper serviceName %q is not a headless Service (clusterIP: None)", zkService)
	}
	zkLabels := mapAt(zk, "spec", "template", "metadata", "labels")
	pdb := false
	for _, d := range m.all() {
		if d["kind"] == "PodDisruptionBudget" && selects(mapAt(d, "spec", "selector", "matchLabels"), zkLabels) {
			pdb = true
		}
	}
	if !pdb {
		p.add("no PodDisruptionBudget selects the ZooKeeper pods")
	}
	servers := ""
	for _, e := range sliceAt(container(zk), "env") {
		if e := asMap(e); e["name"] == "ZOO_SERVERS" {
			servers = str(e["value"])
		}
	}
	var wantZK []string
	for i := 0; i < zkReplicas; i++ {
		host := fmt.Sprintf("%s-%d.%s", zkName, i, zkService)
		wantZK = append(wantZK, host+":2181")
		if !strings.Contains(" "+servers, fmt.Sprintf(" server.%d=%s:2888:3888", i+1, host)) {
			p.add("ZOO_SERVERS %q does not list server.%d=%s:2888:3888", servers, i+1, host)
		}
	}

	// The Baton workers.
	sts := m.find("StatefulSet", "baton")
	if sts == nil {
		return p.add("no StatefulSet baton")
	}
	spec := mapAt(sts, "spec")
	if svc := m.find("Service", str(spec["serviceName"])); svc == nil {
		p.add("baton serviceName %q is not a Service", spec["serviceName"])
	}
	if !selects(mapAt(spec, "selector", "matchLabels"), mapAt(spec, "template", "metadata", "labels")) {
		p.add("baton selector does not match its pod labels")
	}
	c := container(sts)
	env, problemsEnv := resolveEnv(m, c)
	p = append(p, problemsEnv...)
	runner, err1 := strconv.Atoi(env["BATON_RUNNER"])
	backup, err2 := strconv.Atoi(env["BATON_BACKUP"])
	replicas := intOf(spec["replicas"])
	switch {
	case err1 != nil || err2 != nil:
		p.add("baton: BATON_RUNNER %q, BATON_BACKUP %q: want numbers", env["BATON_RUNNER"], env["BATON_BACKUP"])
	case replicas != runner+backup:
		p.add("baton: replicas %d != BATON_RUNNER %d + BATON_BACKUP %d", replicas, runner, backup)
	}
	for _, k := range []string{"BATON_ZK_HOSTS", "BATON_TEMPORAL_ADDRESS", "BATON_STORE"} {
		if env[k] == "" {
			p.add("baton: %s is not set", k)
		}
	}
	if _, ok := env["BATON_NAME"]; ok {
		p.add("baton: BATON_NAME is set for every pod; it must come from the pod name")
	}
	script := flatten(c["command"]) + " " + flatten(c["args"])
	if !strings.Contains(script, "${HOSTNAME##*-}") || !strings.Contains(script, "sc-crawler_") || !strings.Contains(script, "BATON_NAME") {
		p.add("baton: the entrypoint %q does not derive BATON_NAME=sc-crawler_<ordinal+1> from the pod name", script)
	}
	if hosts := strings.Split(env["BATON_ZK_HOSTS"], ","); !sameSet(hosts, wantZK) {
		p.add("baton: BATON_ZK_HOSTS %q, want every ZooKeeper pod %v", env["BATON_ZK_HOSTS"], wantZK)
	}
	if addrPort(env["BATON_METRICS_ADDR"]) != metricsPort {
		p.add("baton: BATON_METRICS_ADDR %q, want :%d", env["BATON_METRICS_ADDR"], metricsPort)
	}
	probe := mapAt(c, "readinessProbe", "httpGet")
	if probe == nil || probe["path"] != "/metrics" || portNumber(c, probe["port"]) != metricsPort {
		p.add("baton: readinessProbe %v, want httpGet /metrics on port %d", c["readinessProbe"], metricsPort)
	}
	mounts := map[string]string{} // mountPath -> volume name
	for _, v := range sliceAt(c, "volumeMounts") {
		v := asMap(v)
		mounts[str(v["mountPath"])] = str(v["name"])
	}
	volumes := map[string]map[string]any{}
	for _, v := range sliceAt(mapAt(spec, "template", "spec"), "volumes") {
		v := asMap(v)
		volumes[str(v["name"])] = v
	}
	// The crawl data lives in the job store: every replica mounting one
	// claim would share it (and need ReadWriteMany storage).
	for _, name := range sortedKeys(volumes) {
		if claim := mapAt(volumes[name], "persistentVolumeClaim"); claim != nil {
			p.add("baton: volume %s is PersistentVolumeClaim %v, shared by every worker; crawl data belongs in the job store", name, claim["claimName"])
		}
	}
	if v, ok := env["BATON_CONCURRENCY"]; ok {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			p.add("baton: BATON_CONCURRENCY %q, want a positive number", v)
		}
	}
	p = append(p, checkK8sStore(m, env, c, mapAt(spec, "template", "spec"))...)
	// Secret files: every BATON_*_FILE under a mounted Secret that exists
	// (but the secrets key, copied from one at start: checkK8sSecurity).
	for k, path := range env {
		if !strings.HasPrefix(k, "BATON_") || !strings.HasSuffix(k, "_FILE") || k == "BATON_SECRETS_KEY_FILE" {
			continue
		}
		secret, key := secretFile(c, mapAt(spec, "template", "spec"), path)
		if secret == "" {
			p.add("baton: %s=%s is not in a mounted Secret", k, path)
		} else if keys, ok := m.secretKeys(secret); !ok {
			p.add("baton: Secret %s (for %s) is not defined", secret, k)
		} else if !slices.Contains(keys, key) {
			p.add("baton: Secret %s has no key %s (for %s)", secret, key, k)
		}
	}
	for _, e := range sliceAt(c, "env") {
		if asMap(asMap(e)["valueFrom"])["secretKeyRef"] != nil {
			p.add("baton: env %v takes a Secret; mount it as a file instead", asMap(e)["name"])
		}
	}
	for _, e := range sliceAt(c, "envFrom") {
		if asMap(e)["secretRef"] != nil {
			p.add("baton: envFrom takes a Secret; mount it as a file instead")
		}
	}
	if sc := mapAt(spec, "template", "spec", "securityContext"); sc["runAsNonRoot"] != true {
		p.add("baton: pods do not run as non-root")
	}
	image := str(c["image"])
	found := false
	for _, i := range sliceAt(m.kustomization, "images") {
		found = found || strings.HasPrefix(image, str(asMap(i)["name"]))
	}
	if !found {
		p.add("baton: image %q is not in the kustomization's images", image)
	}
	return p
}

// checkK8sStore checks the workers' job store: BATON_STORE is a Service of
// these manifests, in this namespace, in front of one PostgreSQL pod that
// keeps its data on its own ReadWriteOnce claim and is ready by pg_isready;
// the DSN's user and database are the server's; the password is no part of
// the DSN and the workers and the server read it from the same Secret key.
func checkK8sStore(m *k8sSet, env map[string]string, worker, workerPod map[string]any) []string {
	var p problems
	u, err := url.Parse(env["BATON_STORE"])
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Hostname() == "" {
		return p.add("baton: BATON_STORE %q, want postgres://user@host:port/database (PostgreSQL: the pods share it)", redactURL(env["BATON_STORE"]))
	}
	if _, has := u.User.Password(); has {
		p.add("baton: BATON_STORE has a password in the DSN; put it in the Secret (BATON_STORE_PASSWORD_FILE)")
	}
	labels := strings.Split(u.Hostname(), ".")
	if ns := str(m.kustomization["namespace"]); len(labels) > 1 && labels[1] != ns {
		return p.add("baton: BATON_STORE host %s is not in namespace %s: want Baton's own PostgreSQL of these manifests", u.Hostname(), ns)
	}
	svc := m.find("Service", labels[0])
	if svc == nil {
		return p.add("baton: BATON_STORE host %s is not a Service of these manifests", u.Hostname())
	}
	port, ports := cmp.Or(u.Port(), postgresPort), []string{}
	for _, sp := range sliceAt(mapAt(svc, "spec"), "ports") {
		ports = append(ports, str(asMap(sp)["port"]))
	}
	if !slices.Contains(ports, port) {
		p.add("baton: BATON_STORE port %s is not a port of Service %s %v", port, labels[0], ports)
	}
	var db map[string]any
	for _, d := range m.all() {
		if d["kind"] == "StatefulSet" && selects(mapAt(svc, "spec", "selector"), mapAt(d, "spec", "template", "metadata", "labels")) {
			db = d
		}
	}
	if db == nil || !strings.HasPrefix(str(container(db)["image"]), "postgres:") {
		return p.add("baton: Service %s does not select a PostgreSQL StatefulSet (image postgres:...)", labels[0])
	}
	dbName := str(mapAt(db, "metadata")["name"])
	if r := intOf(mapAt(db, "spec")["replicas"]); r != 1 {
		p.add("%s: %d replicas, want 1 (separate PostgreSQL servers are separate stores)", dbName, r)
	}
	pg := container(db)
	dbEnv := map[string]string{}
	for _, e := range sliceAt(pg, "env") {
		dbEnv[str(asMap(e)["name"])] = str(asMap(e)["value"])
	}
	user := cmp.Or(dbEnv["POSTGRES_USER"], "postgres")
	database := cmp.Or(dbEnv["POSTGRES_DB"], user)
	if u.User.Username() != user || strings.TrimPrefix(u.Path, "/") != database {
		p.add("baton: BATON_STORE user %q database %q, want %s's %q %q", u.User.Username(), strings.TrimPrefix(u.Path, "/"), dbName, user, database)
	}
	if !strings.Contains(flatten(mapAt(pg, "readinessProbe", "exec")["command"]), "pg_isready") {
		p.add("%s: no readinessProbe running pg_isready", dbName)
	}
	// Its data on its own ReadWriteOnce claim (one per pod).
	dataDir := cmp.Or(dbEnv["PGDATA"], postgresDataDir)
	vol := ""
	for _, v := range sliceAt(pg, "volumeMounts") {
		mp := str(asMap(v)["mountPath"])
		if dataDir == mp || strings.HasPrefix(dataDir, mp+"/") {
			vol = str(asMap(v)["name"])
		}
	}
	own := false
	for _, t := range sliceAt(mapAt(db, "spec"), "volumeClaimTemplates") {
		t := asMap(t)
		own = own || (vol != "" && mapAt(t, "metadata")["name"] == vol && slices.Contains(sliceAt(mapAt(t, "spec"), "accessModes"), any("ReadWriteOnce")))
	}
	if !own {
		p.add("%s: its data %s is not on a ReadWriteOnce volumeClaimTemplate of its own (volume %q)", dbName, dataDir, vol)
	}
	// One password: the workers' file and the server's are the same key.
	wSecret, wKey := secretFile(worker, workerPod, env["BATON_STORE_PASSWORD_FILE"])
	dSecret, dKey := secretFile(pg, mapAt(db, "spec", "template", "spec"), dbEnv["POSTGRES_PASSWORD_FILE"])
	switch {
	case wSecret == "":
		p.add("baton: BATON_STORE_PASSWORD_FILE %q is not a file of a mounted Secret", env["BATON_STORE_PASSWORD_FILE"])
	case dSecret == "":
		p.add("%s: POSTGRES_PASSWORD_FILE %q is not a file of a mounted Secret", dbName, dbEnv["POSTGRES_PASSWORD_FILE"])
	case wSecret != dSecret || wKey != dKey:
		p.add("baton reads the store password from Secret %s key %s, %s from %s key %s", wSecret, wKey, dbName, dSecret, dKey)
	}
	return p
}

// secretFile returns the Secret and key a container reads at path (a file
// of a mounted Secret volume, through its items if any).
func secretFile(c, podSpec map[string]any, path string) (secret, key string) {
	if path == "" {
		return "", ""
	}
	dir, base := filepath.Dir(path), filepath.Base(path)
	for _, vm := range sliceAt(c, "volumeMounts") {
		if str(asMap(vm)["mountPath"]) != dir {
			continue
		}
		for _, v := range sliceAt(podSpec, "volumes") {
			sec := mapAt(asMap(v), "secret")
			if asMap(v)["name"] != asMap(vm)["name"] || sec == nil {
				continue
			}
			items := sliceAt(sec, "items")
			if len(items) == 0 {
				return str(sec["secretName"]), base
			}
			for _, it := range items {
				if str(asMap(it)["path"]) == base {
					return str(sec["secretName"]), str(asMap(it)["key"])
				}
			}
		}
	}
	return "", ""
}

// checkK8sNoRWX: no claim needs ReadWriteMany storage any more.
func checkK8sNoRWX(m *k8sSet) []string {
	var p problems
	for _, d := range m.all() {
		name := mapAt(d, "metadata")["name"]
		if d["kind"] == "PersistentVolumeClaim" && slices.Contains(sliceAt(mapAt(d, "spec"), "accessModes"), any("ReadWriteMany")) {
			p.add("PersistentVolumeClaim %v is ReadWriteMany; nothing needs shared storage", name)
		}
		for _, t := range sliceAt(mapAt(d, "spec"), "volumeClaimTemplates") {
			if slices.Contains(sliceAt(mapAt(asMap(t), "spec"), "accessModes"), any("ReadWriteMany")) {
				p.add("%v %v: volumeClaimTemplate %v is ReadWriteMany", d["kind"], name, mapAt(asMap(t), "metadata")["name"])
			}
		}
	}
	return p
}

// checkK8sConfigMaps: no secret in a ConfigMap, which anyone who may read
// the namespace's configuration sees: no key naming one (but *_FILE paths),
// no Secret's value, no password in a URL.
func checkK8sConfigMaps(m *k8sSet) []string {
	var p problems
	secretValues := k8sSecretValues(m)
	for _, d := range m.all() {
		if d["kind"] != "ConfigMap" {
			continue
		}
		for _, k := range sortedKeys(asMap(d["data"])) {
			v := str(asMap(d["data"])[k])
			if secretWord.MatchString(k) && !strings.HasSuffix(k, "_FILE") {
				p.add("ConfigMap %v: %s looks like a secret; mount it from a Secret as a file", mapAt(d, "metadata")["name"], k)
			}
			if u, err := url.Parse(v); err == nil && u.User != nil {
				if _, has := u.User.Password(); has {
					p.add("ConfigMap %v: %s has a password in its URL", mapAt(d, "metadata")["name"], k)
				}
			}
			for _, s := range secretValues {
				if strings.Contains(v, s) {
					p.add("ConfigMap %v: %s holds a Secret's value", mapAt(d, "metadata")["name"], k)
				}
			}
		}
	}
	return p
}

// k8sSecretValues are the values the manifests give Secrets: a Secret's
// stringData, a secretGenerator's literals (checkK8sSecurity refuses both;
// the values stay out of ConfigMaps and command lines regardless).
func k8sSecretValues(m *k8sSet) []string {
	var out []string
	for _, d := range m.all() {
		if d["kind"] != "Secret" {
			continue
		}
		for _, v := range asMap(d["stringData"]) {
			if s := str(v); len(s) >= 4 {
				out = append(out, s)
			}
		}
	}
	for _, g := range sliceAt(m.kustomization, "secretGenerator") {
		for _, l := range toStrings(asMap(g)["literals"]) {
			if _, v, _ := strings.Cut(l, "="); len(v) >= 4 {
				out = append(out, v)
			}
		}
	}
	return out
}

// resolveEnv returns a container's environment: its env values over the
// ConfigMaps of its envFrom.
func resolveEnv(m *k8sSet, c map[string]any) (map[string]string, []string) {
	var p problems
	env := map[string]string{}
	for _, e := range sliceAt(c, "envFrom") {
		ref := asMap(asMap(e)["configMapRef"])
		if ref == nil {
			continue
		}
		cm := m.find("ConfigMap", str(ref["name"]))
		if cm == nil {
			p.add("envFrom ConfigMap %v is not defined", ref["name"])
			continue
		}
		for k, v := range asMap(cm["data"]) {
			env[k] = str(v)
		}
	}
	for _, e := range sliceAt(c, "env") {
		e := asMap(e)
		env[str(e["name"])] = str(e["value"])
	}
	return env, p
}

func checkK8sCommandLines(m *k8sSet) []string {
	var p problems
	secretValues := k8sSecretValues(m)
	for _, d := range m.all() {
		podSpec := mapAt(d, "spec", "template", "spec")
		if podSpec == nil {
			continue
		}
		for _, list := range []string{"initContainers", "containers"} {
			for _, c := range sliceAt(podSpec, list) {
				c := asMap(c)
				where := fmt.Sprintf("%s %s container %s", d["kind"], mapAt(d, "metadata")["name"], c["name"])
				args := append(toStrings(c["command"]), toStrings(c["args"])...)
				for _, probe := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
					args = append(args, toStrings(mapAt(c, probe, "exec")["command"])...)
				}
				p = append(p, secretsInArgs(where, args, secretValues)...)
			}
		}
	}
	return p
}

// secretArg matches a command-line argument that carries a secret: a flag
// for one (not the *-file flags that name a file), or user:password@ in a URL.
var secretArg = regexp.MustCompile(`(?i)(--?(zk-auth|auth|password|passwd|token|secret|api-key|temporal-api-key|tls-key)(=|$))|://[^/\s:@]+:[^/\s@]+@`)

func secretsInArgs(where string, args, secretValues []string) []string {
	var p problems
	for i, a := range args {
		if secretArg.MatchString(a) || (i > 0 && strings.EqualFold(args[i-1], "--zk-auth")) {
			p.add("%s: secret on the command line: %q", where, a)
		}
		for _, s := range secretValues {
			if strings.Contains(a, s) {
				p.add("%s: a Secret's value appears on the command line", where)
			}
		}
	}
	return p
}

// ------------------------------------------------------------------ loading

func decodeAll(r io.Reader) ([]map[string]any, error) {
	dec := yaml.NewDecoder(r)
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

func decodeFile(path string) ([]map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	docs, err := decodeAll(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return docs, nil
}

func loadOne(t *testing.T, path string) map[string]any {
	t.Helper()
	docs, err := decodeFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 {
		t.Fatalf("%s: %d documents, want 1", path, len(docs))
	}
	return docs[0]
}

func loadK8s(t *testing.T) *k8sSet {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(k8sDir, "*.y*ml"))
	if err != nil {
		t.Fatal(err)
	}
	m := &k8sSet{files: map[string][]map[string]any{}}
	for _, f := range files {
		docs, err := decodeFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == kustomizationFile {
			m.kustomization = docs[0]
			continue
		}
		m.files[filepath.Base(f)] = docs
	}
	if m.kustomization == nil {
		t.Fatalf("no %s/%s", k8sDir, kustomizationFile)
	}
	return m
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goVersion returns go.mod's language version as major.minor.
func goVersion(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(readText(t, "../go.mod"))
	if m == nil {
		t.Fatal("../go.mod: no go line")
	}
	return m[1]
}

// ------------------------------------------------------------------ helpers

type problems []string

func (p *problems) add(format string, args ...any) problems {
	*p = append(*p, fmt.Sprintf(format, args...))
	return *p
}

// expectProblems fails unless a broken copy was found broken.
func expectProblems(t *testing.T, what string, p []string) {
	t.Helper()
	if len(p) == 0 {
		t.Errorf("%s: no problem found", what)
		return
	}
	t.Logf("%s: found %q", what, p)
}

func report(t *testing.T, what string, p []string) {
	t.Helper()
	for _, s := range p {
		t.Errorf("%s: %s", what, s)
	}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// mapAt walks nested mappings; nil when a step is missing.
func mapAt(m map[string]any, path ...string) map[string]any {
	for _, k := range path {
		m = asMap(m[k])
	}
	return m
}

func sliceAt(m map[string]any, k string) []any {
	s, _ := m[k].([]any)
	return s
}

func str(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

func intOf(v any) int {
	n, err := strconv.Atoi(str(v))
	if err != nil {
		return -1
	}
	return n
}

func toStrings(v any) []string {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		out := make([]string, len(v))
		for i, x := range v {
			out[i] = str(x)
		}
		return out
	default:
		return strings.Fields(str(v))
	}
}

func flatten(v any) string { return strings.Join(toStrings(v), " ") }

// envOf reads a compose environment, a mapping or a list of KEY=value.
func envOf(v any) map[string]string {
	out := map[string]string{}
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			out[k] = str(x)
		}
	case []any:
		for _, x := range v {
			k, val, _ := strings.Cut(str(x), "=")
			out[k] = val
		}
	}
	return out
}

func workerEnv(c map[string]any, service string) map[string]any {
	return mapAt(c, "services", service, "environment")
}

// dependsOn reads a compose depends_on, a list or a mapping.
func dependsOn(v any) []string {
	switch v := v.(type) {
	case []any:
		return toStrings(v)
	case map[string]any:
		return sortedKeys(v)
	}
	return nil
}

type composeMount struct{ source, target string }

// composeMounts reads a compose service's volumes, short (source:target[:mode])
// or long syntax; an anonymous volume has no source.
func composeMounts(v any) []composeMount {
	var out []composeMount
	for _, x := range sliceAt(map[string]any{"v": v}, "v") {
		if m := asMap(x); m != nil {
			out = append(out, composeMount{str(m["source"]), str(m["target"])})
			continue
		}
		parts := strings.Split(str(x), ":")
		if len(parts) == 1 {
			out = append(out, composeMount{"", parts[0]})
		} else {
			out = append(out, composeMount{parts[0], parts[1]})
		}
	}
	return out
}

// setComposeStore sets BATON_STORE of every worker and of the CLI.
func setComposeStore(c map[string]any, dsn string) {
	for _, v := range mapAt(c, "services") {
		if env := asMap(asMap(v)["environment"]); env != nil && env["BATON_STORE"] != nil {
			env["BATON_STORE"] = dsn
		}
	}
}

// setK8sStore sets BATON_STORE in the workers' ConfigMap.
func setK8sStore(m *k8sSet, dsn string) {
	mapAt(m.find("ConfigMap", "baton-config"), "data")["BATON_STORE"] = dsn
}

func container(sts map[string]any) map[string]any {
	cs := sliceAt(mapAt(sts, "spec", "template", "spec"), "containers")
	if len(cs) == 0 {
		return nil
	}
	return asMap(cs[0])
}

func statefulSetWithImage(m *k8sSet, prefix string) map[string]any {
	for _, d := range m.all() {
		if d["kind"] == "StatefulSet" && strings.HasPrefix(str(container(d)["image"]), prefix) {
			return d
		}
	}
	return nil
}

// portNumber resolves a probe port, a number or a named container port.
func portNumber(c map[string]any, port any) int {
	if n := intOf(port); n > 0 {
		return n
	}
	for _, p := range sliceAt(c, "ports") {
		if p := asMap(p); p["name"] == port {
			return intOf(p["containerPort"])
		}
	}
	return -1
}

func addrPort(addr string) int {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return -1
	}
	return intOf(addr[i+1:])
}

func selects(selector, labels map[string]any) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b)) && len(a) == len(b)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func keys(m map[string]bool) []string { return sortedKeys(m) }
