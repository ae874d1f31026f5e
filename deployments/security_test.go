package deployments_test

// The deployments are secure by default (README, "Security"): ZooKeeper
// refuses sessions without digest credentials and Baton gives them from a
// file; secrets are files, never literals of the deployment files, values
// of the containers' environment or placeholders applied to a cluster;
// containers run without capabilities, privilege gain or unbounded
// resources; Kubernetes pods get no service-account token, images are
// pinned by digest, the network is closed to the metadata service and the
// cluster, and the job store is reached over TLS that checks its name.
// Each check returns its problems, and TestSecurityChecksCatchBrokenFiles
// shows each fails on a broken copy.

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	zooCfgPath    = "zookeeper/zoo.cfg"
	stackPath     = "scripts/stack.sh"
	demoPath      = "scripts/demo.sh"
	gitignorePath = "../.gitignore"
	// composeSecretsDir and k8sSecretsDir hold the operator's secret files
	// (make-secrets.sh), which git must ignore.
	composeSecretsDir = "deployments/compose/secrets/"
	k8sSecretsDir     = "deployments/k8s/secrets/"
	// The annotations of the workers' NetworkPolicy naming the cluster's
	// pod and service CIDRs, which its egress must exclude.
	podCIDRAnnotation     = "baton.batoncrawl.io/pod-cidr"
	serviceCIDRAnnotation = "baton.batoncrawl.io/service-cidr"
)

// enforceAuth are the zoo.cfg lines that make ZooKeeper refuse every
// request of a session not authenticated with digest credentials.
var enforceAuth = []string{
	"authProvider.1=org.apache.zookeeper.server.auth.DigestAuthenticationProvider",
	"enforce.auth.enabled=true",
	"enforce.auth.schemes=digest",
}

// imageDigest is a pinned image: a real digest, or the documented
// placeholder that fails the pull until the operator fills it.
var imageDigest = regexp.MustCompile(`^sha256:([0-9a-f]{64}|REPLACE-ME(-[A-Za-z0-9.-]+)?)$`)

// secretsKeyCopy is the start script's copy of the group's secrets key
// from a secret file to BATON_SECRETS_KEY_FILE, mode 0600.
var secretsKeyCopy = regexp.MustCompile(`install -m 0?600 (\S+) "\$\$?\{?BATON_SECRETS_KEY_FILE\}?"`)

// mustExclude are the destinations the workers' egress must exclude:
// the metadata service, link-local, private, carrier-grade NAT, loopback.
var mustExclude = []string{"169.254.169.254/32", "169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12",
	"192.168.0.0/16", "100.64.0.0/10", "127.0.0.0/8"}

func TestComposeSecurity(t *testing.T) {
	report(t, composePath, checkComposeSecurity(loadOne(t, composePath)))
}

func TestKubernetesSecurity(t *testing.T) {
	report(t, k8sDir, checkK8sSecurity(loadK8s(t)))
}

func TestLocalStackSecurity(t *testing.T) {
	report(t, "local stack", checkLocalStack(readText(t, zooCfgPath), readText(t, stackPath), readText(t, demoPath)))
}

func TestSecretDirsIgnored(t *testing.T) {
	report(t, gitignorePath, checkIgnored(readText(t, gitignorePath)))
}

func TestSecurityChecksCatchBrokenFiles(t *testing.T) {
	for name, p := range map[string][]string{
		"compose":     checkComposeSecurity(loadOne(t, composePath)),
		"k8s":         checkK8sSecurity(loadK8s(t)),
		"local stack": checkLocalStack(readText(t, zooCfgPath), readText(t, stackPath), readText(t, demoPath)),
		"gitignore":   checkIgnored(readText(t, gitignorePath)),
	} {
		if len(p) > 0 {
			t.Fatalf("the real %s files must pass first: %v", name, p)
		}
	}

	composeCases := map[string]func(c map[string]any){
		"ZooKeeper without enforced auth": func(c map[string]any) {
			env := mapAt(c, "services", "zk2", "environment")
			env["ZOO_CFG_EXTRA"] = strings.ReplaceAll(str(env["ZOO_CFG_EXTRA"]), "enforce.auth.enabled=true", "")
		},
		"worker without ZooKeeper credentials": func(c map[string]any) { delete(workerEnv(c, "sc-crawler-2"), "BATON_ZK_AUTH_FILE") },
		"credentials as a literal": func(c map[string]any) {
			env := workerEnv(c, "sc-crawler-1")
			delete(env, "BATON_ZK_AUTH_FILE")
			env["BATON_ZK_AUTH"] = "baton:hunter2"
		},
		"credentials file not a secret": func(c map[string]any) { workerEnv(c, "sc-crawler-3")["BATON_ZK_AUTH_FILE"] = "/data/zk-auth" },
		"secret not given to a worker": func(c map[string]any) {
			mapAt(c, "services", "sc-crawler-1")["secrets"] = []any{"secrets-key"}
		},
		"secret from a literal": func(c map[string]any) {
			mapAt(c, "secrets")["zk-auth"] = map[string]any{"content": "baton:hunter2"}
		},
		"secret file outside the secrets dir": func(c map[string]any) {
			mapAt(c, "secrets")["zk-auth"] = map[string]any{"file": "./zk-auth"}
		},
		"CLI without ZooKeeper credentials": func(c map[string]any) {
			delete(mapAt(c, "services", "baton", "environment"), "BATON_ZK_AUTH_FILE")
		},
		"secrets key not shared": func(c map[string]any) { delete(workerEnv(c, "sc-crawler-1"), "BATON_SECRETS_KEY_FILE") },
		"secrets key not copied": func(c map[string]any) {
			mapAt(c, "services", "sc-crawler-2")["entrypoint"] = []any{"baton-worker"}
		},
		"secrets key on a disk": func(c map[string]any) {
			mapAt(c, "services", "sc-crawler-2")["tmpfs"] = []any{"/tmp"}
		},
		"deny-private off": func(c map[string]any) { workerEnv(c, "sc-crawler-3")["BATON_DENY_PRIVATE"] = "false" },
		"worker writable":  func(c map[string]any) { delete(mapAt(c, "services", "sc-crawler-1"), "read_only") },
		"no tmpfs /tmp": func(c map[string]any) {
			mapAt(c, "services", "sc-crawler-3")["tmpfs"] = []any{"/run/baton"}
		},
		"capabilities kept": func(c map[string]any) { delete(mapAt(c, "services", "zk1"), "cap_drop") },
		"a capability added": func(c map[string]any) {
			mapAt(c, "services", "baton-db")["cap_add"] = []any{"NET_ADMIN"}
		},
		"privileged": func(c map[string]any) { mapAt(c, "services", "temporal")["privileged"] = true },
		"privileges may be gained": func(c map[string]any) {
			mapAt(c, "services", "sc-crawler-2")["security_opt"] = []any{"seccomp:unconfined"}
		},
		"no memory limit": func(c map[string]any) {
			delete(mapAt(c, "services", "sc-crawler-1", "deploy", "resources", "limits"), "memory")
		},
		"no CPU limit": func(c map[string]any) {
			delete(mapAt(c, "services", "baton-db", "deploy", "resources", "limits"), "cpus")
		},
		"no limits": func(c map[string]any) { delete(mapAt(c, "services", "temporal-ui"), "deploy") },
		"ZooKeeper as root": func(c map[string]any) {
			mapAt(c, "services", "zk3")["user"] = "0"
		},
		"PostgreSQL's entrypoint as root": func(c map[string]any) { delete(mapAt(c, "services", "postgresql"), "user") },
		"host network": func(c map[string]any) {
			mapAt(c, "services", "sc-crawler-1")["network_mode"] = "host"
		},
	}
	for name, mutate := range composeCases {
		c := loadOne(t, composePath)
		mutate(c)
		expectProblems(t, "compose "+name, checkComposeSecurity(c))
	}

	k8sCases := map[string]func(m *k8sSet){
		"placeholder Secret applied": func(m *k8sSet) {
			m.files["baton.yaml"] = append(m.files["baton.yaml"], map[string]any{"apiVersion": "v1", "kind": "Secret",
				"metadata": map[string]any{"name": "baton-secrets"}, "stringData": map[string]any{"zk-auth": "baton:CHANGE-ME"}})
		},
		"generator literal": func(m *k8sSet) {
			asMap(sliceAt(m.kustomization, "secretGenerator")[0])["literals"] = []any{"zk-auth=baton:CHANGE-ME"}
		},
		"generator file outside secrets/": func(m *k8sSet) {
			asMap(sliceAt(m.kustomization, "secretGenerator")[0])["files"] = []any{"zk-auth=zk-auth.txt",
				"store-password=secrets/store-password", "secrets-key=secrets/secrets-key"}
		},
		"worker token mounted": func(m *k8sSet) {
			delete(mapAt(m.find("StatefulSet", "baton"), "spec", "template", "spec"), "automountServiceAccountToken")
		},
		"ZooKeeper token mounted": func(m *k8sSet) {
			mapAt(m.find("StatefulSet", "zk"), "spec", "template", "spec")["automountServiceAccountToken"] = true
		},
		"PostgreSQL token mounted": func(m *k8sSet) {
			delete(mapAt(m.find("StatefulSet", "baton-db"), "spec", "template", "spec"), "automountServiceAccountToken")
		},
		"image :latest": func(m *k8sSet) {
			container(m.find("StatefulSet", "baton"))["image"] = "ghcr.io/batoncrawl/baton:latest"
		},
		"image by tag": func(m *k8sSet) {
			for _, i := range sliceAt(m.kustomization, "images") {
				if i := asMap(i); i["name"] == "ghcr.io/batoncrawl/baton" {
					delete(i, "digest")
					i["newTag"] = "latest"
				}
			}
		},
		"image not pinned": func(m *k8sSet) {
			m.kustomization["images"] = slices.DeleteFunc(slices.Clone(sliceAt(m.kustomization, "images")),
				func(v any) bool { return asMap(v)["name"] == "zookeeper" })
		},
		"bad digest": func(m *k8sSet) {
			for _, i := range sliceAt(m.kustomization, "images") {
				if i := asMap(i); i["name"] == "postgres" {
					i["digest"] = "16"
				}
			}
		},
		"no NetworkPolicy for the workers": func(m *k8sSet) { m.drop("NetworkPolicy", "baton-workers") },
		"no default deny":                  func(m *k8sSet) { m.drop("NetworkPolicy", "default-deny") },
		"metadata service open": func(m *k8sSet) {
			removeExcept(m, func(c string) bool { return strings.HasPrefix(c, "169.254.") })
		},
		"private networks open": func(m *k8sSet) { removeExcept(m, func(c string) bool { return c == "172.16.0.0/12" }) },
		"pod CIDR not excluded": func(m *k8sSet) {
			mapAt(m.find("NetworkPolicy", "baton-workers"), "metadata", "annotations")[podCIDRAnnotation] = "198.18.0.0/15"
		},
		"service CIDR not set": func(m *k8sSet) {
			delete(mapAt(m.find("NetworkPolicy", "baton-workers"), "metadata", "annotations"), serviceCIDRAnnotation)
		},
		"egress to everything": func(m *k8sSet) {
			spec := mapAt(m.find("NetworkPolicy", "baton-workers"), "spec")
			spec["egress"] = append(sliceAt(spec, "egress"), map[string]any{})
		},
		"ZooKeeper unreachable": func(m *k8sSet) {
			spec := mapAt(m.find("NetworkPolicy", "baton-workers"), "spec")
			spec["egress"] = slices.DeleteFunc(slices.Clone(sliceAt(spec, "egress")), func(v any) bool {
				return strings.Contains(fmt.Sprint(v), "zookeeper")
			})
		},
		"ZooKeeper open to all": func(m *k8sSet) {
			spec := mapAt(m.find("NetworkPolicy", "zookeeper"), "spec")
			spec["ingress"] = append(sliceAt(spec, "ingress"), map[string]any{"from": []any{map[string]any{"namespaceSelector": map[string]any{}}}})
		},
		"store without TLS": func(m *k8sSet) { setK8sStore(m, "postgres://baton@baton-db:5432/baton?sslmode=disable") },
		"store TLS unverified": func(m *k8sSet) {
			setK8sStore(m, "postgres://baton@baton-db:5432/baton?sslmode=require&sslrootcert=/etc/baton/store-tls/ca.crt")
		},
		"store CA not mounted": func(m *k8sSet) {
			setK8sStore(m, "postgres://baton@baton-db:5432/baton?sslmode=verify-full&sslrootcert=/etc/ssl/ca.crt")
		},
		"PostgreSQL without TLS": func(m *k8sSet) {
			c := container(m.find("StatefulSet", "baton-db"))
			c["args"] = slices.DeleteFunc(slices.Clone(sliceAt(c, "args")), func(v any) bool { return v == "ssl=on" })
		},
		"PostgreSQL admits clear text": func(m *k8sSet) {
			d := mapAt(m.find("ConfigMap", "baton-db-hba"), "data")
			d["pg_hba.conf"] = str(d["pg_hba.conf"]) + "host all all 0.0.0.0/0 scram-sha-256\n"
		},
		"ZooKeeper without enforced auth": func(m *k8sSet) {
			for _, e := range sliceAt(container(m.find("StatefulSet", "zk")), "env") {
				if e := asMap(e); e["name"] == "ZOO_CFG_EXTRA" {
					e["value"] = "quorumListenOnAllIPs=true"
				}
			}
		},
		"worker without ZooKeeper credentials": func(m *k8sSet) {
			delete(mapAt(m.find("ConfigMap", "baton-config"), "data"), "BATON_ZK_AUTH_FILE")
		},
		"deny-private off": func(m *k8sSet) {
			mapAt(m.find("ConfigMap", "baton-config"), "data")["BATON_DENY_PRIVATE"] = "false"
		},
		"secrets key not copied": func(m *k8sSet) {
			container(m.find("StatefulSet", "baton"))["args"] = []any{"BATON_NAME=sc-crawler_$(( ${HOSTNAME##*-} + 1 )) exec baton-worker"}
		},
		"secrets key on the node's disk": func(m *k8sSet) {
			for _, v := range sliceAt(mapAt(m.find("StatefulSet", "baton"), "spec", "template", "spec"), "volumes") {
				if v := asMap(v); v["name"] == "run" {
					v["emptyDir"] = map[string]any{}
				}
			}
		},
		"worker writable root": func(m *k8sSet) {
			mapAt(container(m.find("StatefulSet", "baton")), "securityContext")["readOnlyRootFilesystem"] = false
		},
		"privilege escalation": func(m *k8sSet) {
			mapAt(container(m.find("StatefulSet", "zk")), "securityContext")["allowPrivilegeEscalation"] = true
		},
		"capabilities kept": func(m *k8sSet) {
			delete(mapAt(container(m.find("StatefulSet", "baton-db")), "securityContext"), "capabilities")
		},
	}
	for name, mutate := range k8sCases {
		m := loadK8s(t)
		mutate(m)
		expectProblems(t, "k8s "+name, append(checkK8sSecurity(m), checkK8s(m)...))
	}

	zooCfg, stack, demo := readText(t, zooCfgPath), readText(t, stackPath), readText(t, demoPath)
	stackCases := map[string][3]string{
		"zoo.cfg without enforced auth":     {strings.ReplaceAll(zooCfg, "enforce.auth.enabled=true", "enforce.auth.enabled=false"), stack, demo},
		"zoo.cfg without the digest scheme": {strings.ReplaceAll(zooCfg, "enforce.auth.schemes=digest", ""), stack, demo},
		"no credentials made":               {zooCfg, strings.ReplaceAll(stack, "zk_credentials\n", "\n"), demo},
		"credentials readable by others":    {zooCfg, strings.ReplaceAll(stack, "umask 077", "umask 022"), demo},
		"demo workers without credentials": {zooCfg, stack,
			strings.Replace(demo, `      --zk-auth-file "${ZK_AUTH_FILE}" --temporal-address`, `      --temporal-address`, 1)},
		"demo CLI without credentials": {zooCfg, stack,
			strings.Replace(demo, `--zk-auth-file "${ZK_AUTH_FILE}" --temporal-address "${TEMPORAL}" --ui-url`, `--temporal-address "${TEMPORAL}" --ui-url`, 1)},
		"demo credentials elsewhere": {zooCfg, stack, strings.ReplaceAll(demo, `ZK_AUTH_FILE="${STACK_DIR}/zk-auth"`, `ZK_AUTH_FILE="/tmp/zk-auth"`)},
	}
	for name, files := range stackCases {
		expectProblems(t, "local stack "+name, checkLocalStack(files[0], files[1], files[2]))
	}
	gitignore := readText(t, gitignorePath)
	for _, dir := range []string{composeSecretsDir, k8sSecretsDir} {
		expectProblems(t, "gitignore without "+dir, checkIgnored(strings.ReplaceAll(gitignore, dir, "")))
	}
}

// ------------------------------------------------------------------ compose

func checkComposeSecurity(c map[string]any) []string {
	var p problems
	services := mapAt(c, "services")
	declared := mapAt(c, "secrets")
	for _, name := range sortedKeys(declared) {
		s := asMap(declared[name])
		file := str(s["file"])
		if file == "" {
			p.add("secret %s: not from a file (%v): a secret's value is never in this file nor in Compose's environment", name, sortedKeys(s))
		} else if dir := path.Dir(path.Clean(file)); dir != "secrets" {
			p.add("secret %s: file %s is not in ./secrets/ (make-secrets.sh compose makes it there; git ignores it)", name, file)
		}
	}
	for _, name := range sortedKeys(services) {
		s := asMap(services[name])
		if !slices.Contains(toStrings(s["cap_drop"]), "ALL") {
			p.add("%s: cap_drop is not [ALL]", name)
		}
		if add := toStrings(s["cap_add"]); len(add) > 0 {
			p.add("%s: cap_add %v: no container needs a capability", name, add)
		}
		if s["privileged"] == true {
			p.add("%s: privileged", name)
		}
		nnp := false
		for _, o := range toStrings(s["security_opt"]) {
			nnp = nnp || o == "no-new-privileges:true" || o == "no-new-privileges"
		}
		if !nnp {
			p.add("%s: no security_opt no-new-privileges:true", name)
		}
		limits := mapAt(s, "deploy", "resources", "limits")
		if str(limits["memory"]) == "" || str(limits["cpus"]) == "" {
			p.add("%s: no deploy.resources.limits memory and cpus (have %v)", name, limits)
		}
		for _, k := range []string{"network_mode", "pid", "ipc"} {
			if str(s[k]) == "host" {
				p.add("%s: %s: host", name, k)
			}
		}
		image := str(s["image"])
		if strings.HasPrefix(image, "zookeeper:") || strings.HasPrefix(image, "postgres:") {
			// Their entrypoints chown and switch user as root, which takes
			// capabilities: run them as the image's user instead.
			if u, _, _ := strings.Cut(str(s["user"]), ":"); u == "" || u == "0" || u == "root" {
				p.add("%s: user %q: run %s as its unprivileged user (it has no capabilities for its root entrypoint)", name, str(s["user"]), image)
			}
		}
		env := envOf(s["environment"])
		if strings.HasPrefix(image, "zookeeper:") {
			for _, line := range enforceAuth {
				if !slices.Contains(strings.Fields(env["ZOO_CFG_EXTRA"]), line) {
					p.add("%s: ZOO_CFG_EXTRA lacks %s: ZooKeeper must refuse sessions without digest credentials", name, line)
				}
			}
		}
		if isBatonService(s) {
			p = append(p, checkComposeBaton(name, s, declared)...)
		}
	}
	return p
}

// checkComposeBaton checks a worker or the CLI: a read-only root, the
// ZooKeeper credentials and the secrets key from secret files (the key
// copied to a tmpfs, 0600), no secret literal in its environment, and
// for a worker the deny-private policy.
func checkComposeBaton(name string, s, declared map[string]any) []string {
	var p problems
	env := envOf(s["environment"])
	if s["read_only"] != true {
		p.add("%s: read_only is not true", name)
	}
	tmpfs := toStrings(s["tmpfs"])
	if !slices.Contains(tmpfs, "/tmp") {
		p.add("%s: no tmpfs /tmp (the root file system is read-only)", name)
	}
	given := toStrings(s["secrets"])
	// secretAt names the secret of a /run/secrets path the service is given.
	secretAt := func(file string) string {
		n, ok := strings.CutPrefix(file, "/run/secrets/")
		if !ok || !slices.Contains(given, n) || declared[n] == nil {
			return ""
		}
		return n
	}
	for _, k := range []string{"BATON_ZK_AUTH", "BATON_TEMPORAL_API_KEY"} {
		if _, ok := env[k]; ok {
			p.add("%s: %s is a secret's value in the environment; give it as a secret file (%s_FILE)", name, k, k)
		}
	}
	if v, ok := env["BATON_STORE_PASSWORD"]; ok && !strings.HasPrefix(v, "${") {
		p.add("%s: BATON_STORE_PASSWORD is a literal of this file; take it from the environment (${BATON_STORE_PASSWORD})", name)
	}
	if f := env["BATON_ZK_AUTH_FILE"]; secretAt(f) == "" {
		p.add("%s: BATON_ZK_AUTH_FILE %q is not a secret file it is given (/run/secrets/<secret>): ZooKeeper refuses sessions without credentials", name, f)
	}
	keyFile := env["BATON_SECRETS_KEY_FILE"]
	script := flatten(s["entrypoint"]) + " " + flatten(s["command"])
	switch m := secretsKeyCopy.FindStringSubmatch(script); {
	case keyFile == "":
		p.add("%s: no BATON_SECRETS_KEY_FILE: each container would make a secrets key of its own, and jobs with secrets would fail on the others", name)
	case m == nil:
		p.add("%s: its entrypoint does not copy the group's secrets key to BATON_SECRETS_KEY_FILE (install -m 600 /run/secrets/... \"$BATON_SECRETS_KEY_FILE\")", name)
	case secretAt(m[1]) == "":
		p.add("%s: the secrets key is copied from %s, not a secret file it is given", name, m[1])
	case !slices.Contains(tmpfs, filepath.Dir(keyFile)):
		p.add("%s: BATON_SECRETS_KEY_FILE %s is not on a tmpfs of its own", name, keyFile)
	}
	if _, worker := env["BATON_NAME"]; worker && env["BATON_DENY_PRIVATE"] != "true" {
		p.add("%s: BATON_DENY_PRIVATE is %q, want \"true\": a page must not lead a worker to this host's services", name, env["BATON_DENY_PRIVATE"])
	}
	return p
}

// isBatonService reports whether a compose service runs Baton's image (it
// is built from the Dockerfile): a worker or the CLI.
func isBatonService(s map[string]any) bool {
	return str(asMap(s["build"])["dockerfile"]) == dockerfilePath || strings.HasSuffix(str(asMap(s["build"])["dockerfile"]), "/"+dockerfilePath)
}

// isBatonCLI reports whether a compose service is the CLI: Baton's image,
// not a worker (no BATON_NAME).
func isBatonCLI(s map[string]any) bool {
	_, worker := envOf(s["environment"])["BATON_NAME"]
	return isBatonService(s) && !worker
}

// ------------------------------------------------------------------ Kubernetes

// secretKeys returns the keys of Secret name: one of the manifests, or one
// the kustomization's secretGenerator makes.
func (m *k8sSet) secretKeys(name string) ([]string, bool) {
	if s := m.find("Secret", name); s != nil {
		return append(sortedKeys(asMap(s["stringData"])), sortedKeys(asMap(s["data"]))...), true
	}
	for _, g := range sliceAt(m.kustomization, "secretGenerator") {
		g := asMap(g)
		if g["name"] != name {
			continue
		}
		var keys []string
		for _, f := range toStrings(g["files"]) {
			k, file, ok := strings.Cut(f, "=")
			if !ok {
				k = path.Base(file)
			}
			keys = append(keys, k)
		}
		for _, l := range toStrings(g["literals"]) {
			k, _, _ := strings.Cut(l, "=")
			keys = append(keys, k)
		}
		return keys, true
	}
	return nil, false
}

func checkK8sSecurity(m *k8sSet) []string {
	var p problems
	// Secrets: from the operator's files, never from the manifests.
	for _, d := range m.all() {
		if d["kind"] == "Secret" {
			p.add("Secret %v is applied from the manifests: its values would be placeholders or in git; "+
				"make it with the kustomization's secretGenerator from files, or with kubectl create secret", mapAt(d, "metadata")["name"])
		}
	}
	for _, g := range sliceAt(m.kustomization, "secretGenerator") {
		g := asMap(g)
		if len(toStrings(g["literals"])) > 0 || g["envs"] != nil {
			p.add("secretGenerator %v: literals or envs; take the values from files under secrets/", g["name"])
		}
		for _, f := range toStrings(g["files"]) {
			_, file, ok := strings.Cut(f, "=")
			if !ok {
				file = f
			}
			if !strings.HasPrefix(path.Clean(file), "secrets/") {
				p.add("secretGenerator %v: file %s is not under secrets/ (git-ignored; make-secrets.sh k8s)", g["name"], file)
			}
		}
	}
	// Pinned images.
	pinned := map[string]string{}
	for _, i := range sliceAt(m.kustomization, "images") {
		i := asMap(i)
		if i["newTag"] != nil || i["newName"] != nil {
			p.add("kustomization image %v: newTag/newName %v %v; pin it with digest only", i["name"], i["newTag"], i["newName"])
		}
		pinned[str(i["name"])] = str(i["digest"])
	}
	for _, d := range m.all() {
		podSpec := mapAt(d, "spec", "template", "spec")
		if podSpec == nil {
			continue
		}
		name := fmt.Sprintf("%v %v", d["kind"], mapAt(d, "metadata")["name"])
		if podSpec["automountServiceAccountToken"] != false {
			p.add("%s: automountServiceAccountToken is not false: Baton's pods do not talk to the API server", name)
		}
		for _, list := range []string{"initContainers", "containers"} {
			for _, c := range sliceAt(podSpec, list) {
				c := asMap(c)
				image := str(c["image"])
				repo, tag := imageRepo(image)
				switch {
				case tag == "latest":
					p.add("%s: image %s: a :latest tag", name, image)
				case strings.Contains(image, "@"):
				case !imageDigest.MatchString(pinned[repo]):
					p.add("%s: image %s is not pinned by digest in the kustomization's images (digest %q)", name, image, pinned[repo])
				}
				sc := asMap(c["securityContext"])
				if sc["allowPrivilegeEscalation"] != false {
					p.add("%s container %v: allowPrivilegeEscalation is not false", name, c["name"])
				}
				if !slices.Contains(toStrings(mapAt(sc, "capabilities")["drop"]), "ALL") {
					p.add("%s container %v: capabilities are not dropped (drop: [ALL])", name, c["name"])
				}
			}
		}
	}
	p = append(p, checkK8sNetwork(m)...)
	p = append(p, checkK8sStoreTLS(m)...)

	// ZooKeeper refuses sessions without credentials; the workers have them.
	if zk := statefulSetWithImage(m, "zookeeper:"); zk != nil {
		extra := ""
		for _, e := range sliceAt(container(zk), "env") {
			if e := asMap(e); e["name"] == "ZOO_CFG_EXTRA" {
				extra = str(e["value"])
			}
		}
		for _, line := range enforceAuth {
			if !slices.Contains(strings.Fields(extra), line) {
				p.add("ZooKeeper: ZOO_CFG_EXTRA lacks %s: it must refuse sessions without digest credentials", line)
			}
		}
	}
	sts := m.find("StatefulSet", "baton")
	if sts == nil {
		return p.add("no StatefulSet baton")
	}
	c := container(sts)
	podSpec := mapAt(sts, "spec", "template", "spec")
	env, _ := resolveEnv(m, c)
	if env["BATON_ZK_AUTH_FILE"] == "" {
		p.add("baton: no BATON_ZK_AUTH_FILE: ZooKeeper refuses sessions without credentials")
	}
	if env["BATON_DENY_PRIVATE"] != "true" {
		p.add("baton: BATON_DENY_PRIVATE is %q, want \"true\"", env["BATON_DENY_PRIVATE"])
	}
	if sc := asMap(c["securityContext"]); sc["readOnlyRootFilesystem"] != true {
		p.add("baton: readOnlyRootFilesystem is not true")
	}
	// The secrets key: copied from a Secret's file at start, to a memory
	// volume (Baton wants it 0600 and its own; a Secret's files are not).
	keyFile := env["BATON_SECRETS_KEY_FILE"]
	script := flatten(c["command"]) + " " + flatten(c["args"])
	match := secretsKeyCopy.FindStringSubmatch(script)
	switch {
	case keyFile == "":
		p.add("baton: no BATON_SECRETS_KEY_FILE: each pod would make a secrets key of its own")
	case match == nil:
		p.add("baton: the entrypoint does not copy the group's secrets key to BATON_SECRETS_KEY_FILE (install -m 600 ...)")
	default:
		if secret, key := secretFile(c, podSpec, match[1]); secret == "" {
			p.add("baton: the secrets key is copied from %s, not a file of a mounted Secret", match[1])
		} else if keys, _ := m.secretKeys(secret); !slices.Contains(keys, key) {
			p.add("baton: Secret %s has no key %s (the secrets key)", secret, key)
		}
		vol := ""
		for _, vm := range sliceAt(c, "volumeMounts") {
			if str(asMap(vm)["mountPath"]) == filepath.Dir(keyFile) {
				vol = str(asMap(vm)["name"])
			}
		}
		memory := false
		for _, v := range sliceAt(podSpec, "volumes") {
			memory = memory || (asMap(v)["name"] == vol && vol != "" && mapAt(asMap(v), "emptyDir")["medium"] == "Memory")
		}
		if !memory {
			p.add("baton: BATON_SECRETS_KEY_FILE %s is not on an emptyDir of medium Memory", keyFile)
		}
	}
	return p
}

// imageRepo splits an image reference into its repository and tag.
func imageRepo(image string) (repo, tag string) {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i], image[i+1:]
	}
	return image, ""
}

// checkK8sNetwork checks the NetworkPolicies: a default deny of both
// directions; the workers reach the web but not the metadata service,
// private ranges or the cluster's pod and service CIDRs, and reach
// ZooKeeper, their store and Temporal by rules of their own; ZooKeeper
// and the store admit the pods of these manifests only.
func checkK8sNetwork(m *k8sSet) []string {
	var p problems
	var policies []map[string]any
	for _, d := range m.all() {
		if d["kind"] == "NetworkPolicy" {
			policies = append(policies, d)
		}
	}
	denyAll := false
	for _, d := range policies {
		spec := mapAt(d, "spec")
		types := toStrings(spec["policyTypes"])
		denyAll = denyAll || (len(asMap(spec["podSelector"])) == 0 && spec["podSelector"] != nil &&
			slices.Contains(types, "Ingress") && slices.Contains(types, "Egress") &&
			len(sliceAt(spec, "ingress")) == 0 && len(sliceAt(spec, "egress")) == 0)
	}
	if !denyAll {
		p.add("no default-deny NetworkPolicy (podSelector {}, policyTypes Ingress and Egress, no rules)")
	}
	labelsOf := func(sts string) map[string]any {
		return mapAt(m.find("StatefulSet", sts), "spec", "template", "metadata", "labels")
	}
	selecting := func(labels map[string]any, typ string) []map[string]any {
		var out []map[string]any
		for _, d := range policies {
			spec := mapAt(d, "spec")
			if selects(mapAt(spec, "podSelector", "matchLabels"), labels) && slices.Contains(toStrings(spec["policyTypes"]), typ) {
				out = append(out, d)
			}
		}
		return out
	}
	workers := labelsOf("baton")
	egress := selecting(workers, "Egress")
	if len(egress) == 0 {
		return p.add("no NetworkPolicy limits the workers' egress")
	}
	reaches := map[string]bool{}
	for _, d := range egress {
		name := mapAt(d, "metadata")["name"]
		ann := mapAt(d, "metadata", "annotations")
		var cluster []string
		for _, a := range []string{podCIDRAnnotation, serviceCIDRAnnotation} {
			if _, _, err := net.ParseCIDR(str(ann[a])); err != nil {
				p.add("NetworkPolicy %v: annotation %s %q: set it to the cluster's CIDR", name, a, str(ann[a]))
			} else {
				cluster = append(cluster, str(ann[a]))
			}
		}
		for _, r := range sliceAt(mapAt(d, "spec"), "egress") {
			r := asMap(r)
			to := sliceAt(r, "to")
			if len(to) == 0 {
				p.add("NetworkPolicy %v: an egress rule without `to` allows every destination", name)
			}
			ports := portsOf(r)
			for _, peer := range to {
				peer := asMap(peer)
				switch {
				case peer["ipBlock"] != nil:
					p = append(p, checkIPBlock(fmt.Sprint(name), mapAt(peer, "ipBlock"), cluster)...)
				case peer["podSelector"] != nil && peer["namespaceSelector"] == nil:
					for _, target := range []struct{ sts, port string }{{"zk", "2181"}, {"baton-db", postgresPort}} {
						if selects(mapAt(peer, "podSelector", "matchLabels"), labelsOf(target.sts)) && slices.Contains(ports, target.port) {
							reaches[target.sts] = true
						}
					}
				case mapAt(peer, "namespaceSelector", "matchLabels")["kubernetes.io/metadata.name"] == "temporal" && slices.Contains(ports, "7233"):
					reaches["temporal"] = true
				}
			}
		}
	}
	for _, target := range []string{"zk", "baton-db", "temporal"} {
		if !reaches[target] {
			p.add("the workers' NetworkPolicy has no egress rule to %s (by selector and port)", target)
		}
	}
	// ZooKeeper and the store: ingress from pods of these manifests only.
	for _, sts := range []string{"zk", "baton-db"} {
		in := selecting(labelsOf(sts), "Ingress")
		if len(in) == 0 {
			p.add("no NetworkPolicy limits the ingress of %s", sts)
		}
		for _, d := range in {
			for _, r := range sliceAt(mapAt(d, "spec"), "ingress") {
				from := sliceAt(asMap(r), "from")
				if len(from) == 0 {
					p.add("NetworkPolicy %v: an ingress rule of %s admits everyone", mapAt(d, "metadata")["name"], sts)
				}
				for _, f := range from {
					f := asMap(f)
					if f["namespaceSelector"] != nil || f["ipBlock"] != nil || len(mapAt(f, "podSelector", "matchLabels")) == 0 {
						p.add("NetworkPolicy %v: %s admits %v, not only pods of these manifests", mapAt(d, "metadata")["name"], sts, f)
					}
				}
			}
		}
	}
	return p
}

func portsOf(rule map[string]any) []string {
	var out []string
	for _, pt := range sliceAt(rule, "ports") {
		out = append(out, str(asMap(pt)["port"]))
	}
	return out
}

// checkIPBlock checks that an egress ipBlock to a wide range excludes the
// metadata service, the private ranges and the cluster's CIDRs.
func checkIPBlock(policy string, b map[string]any, cluster []string) []string {
	var p problems
	_, block, err := net.ParseCIDR(str(b["cidr"]))
	if err != nil {
		return p.add("NetworkPolicy %s: ipBlock cidr %q", policy, b["cidr"])
	}
	var except []*net.IPNet
	for _, e := range toStrings(b["except"]) {
		if _, n, err := net.ParseCIDR(e); err == nil {
			except = append(except, n)
		} else {
			p.add("NetworkPolicy %s: except %q is not a CIDR", policy, e)
		}
	}
	covered := func(cidr string) bool {
		_, n, _ := net.ParseCIDR(cidr)
		ones, _ := n.Mask.Size()
		for _, e := range except {
			eo, _ := e.Mask.Size()
			if e.Contains(n.IP) && eo <= ones {
				return true
			}
		}
		return false
	}
	for _, cidr := range append(slices.Clone(mustExclude), cluster...) {
		ip, _, _ := net.ParseCIDR(cidr)
		if block.Contains(ip) && !covered(cidr) {
			p.add("NetworkPolicy %s: egress to %s does not exclude %s", policy, block, cidr)
		}
	}
	return p
}

// checkK8sStoreTLS: the workers reach the store with sslmode=verify-full
// and a CA from a mounted Secret; the in-cluster PostgreSQL serves TLS with
// a certificate and key from a mounted Secret and admits TCP clients over
// TLS only.
func checkK8sStoreTLS(m *k8sSet) []string {
	var p problems
	sts := m.find("StatefulSet", "baton")
	c := container(sts)
	env, _ := resolveEnv(m, c)
	u, err := url.Parse(env["BATON_STORE"])
	if err != nil {
		return p.add("baton: BATON_STORE: %v", err)
	}
	q := u.Query()
	if q.Get("sslmode") != "verify-full" {
		p.add("baton: BATON_STORE sslmode %q, want verify-full (TLS, the certificate and its name checked)", q.Get("sslmode"))
	}
	if ca := q.Get("sslrootcert"); ca == "" {
		p.add("baton: BATON_STORE has no sslrootcert (the CA of the store's certificate)")
	} else if secret, _ := secretFile(c, mapAt(sts, "spec", "template", "spec"), ca); secret == "" {
		p.add("baton: BATON_STORE sslrootcert %s is not a file of a mounted Secret", ca)
	}
	db := m.find("StatefulSet", strings.Split(u.Hostname(), ".")[0])
	if db == nil {
		return p
	}
	pg := container(db)
	podSpec := mapAt(db, "spec", "template", "spec")
	settings := map[string]string{}
	args := toStrings(pg["args"])
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-c" {
			k, v, _ := strings.Cut(args[i+1], "=")
			settings[k] = v
		}
	}
	if settings["ssl"] != "on" {
		p.add("baton-db: not started with -c ssl=on")
	}
	for _, k := range []string{"ssl_cert_file", "ssl_key_file"} {
		if secret, _ := secretFile(pg, podSpec, settings[k]); secret == "" {
			p.add("baton-db: %s %q is not a file of a mounted Secret", k, settings[k])
		}
	}
	hba := configMapFile(m, pg, podSpec, settings["hba_file"])
	if hba == "" {
		p.add("baton-db: no hba_file from a mounted ConfigMap: the image's pg_hba.conf admits clients without TLS")
	}
	for _, line := range strings.Split(hba, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && !strings.HasPrefix(f[0], "#") && f[0] != "local" && f[0] != "hostssl" {
			p.add("baton-db: pg_hba.conf line %q admits clients without TLS (want hostssl)", line)
		}
	}
	return p
}

// configMapFile returns the content of the file at path of a container's
// mounted ConfigMap, or "".
func configMapFile(m *k8sSet, c, podSpec map[string]any, file string) string {
	if file == "" {
		return ""
	}
	for _, vm := range sliceAt(c, "volumeMounts") {
		if str(asMap(vm)["mountPath"]) != filepath.Dir(file) {
			continue
		}
		for _, v := range sliceAt(podSpec, "volumes") {
			v := asMap(v)
			if v["name"] == asMap(vm)["name"] && v["configMap"] != nil {
				cm := m.find("ConfigMap", str(mapAt(v, "configMap")["name"]))
				return str(mapAt(cm, "data")[filepath.Base(file)])
			}
		}
	}
	return ""
}

// removeExcept drops the except entries of the workers' egress that drop
// says.
func removeExcept(m *k8sSet, drop func(cidr string) bool) {
	for _, r := range sliceAt(mapAt(m.find("NetworkPolicy", "baton-workers"), "spec"), "egress") {
		for _, peer := range sliceAt(asMap(r), "to") {
			if b := mapAt(asMap(peer), "ipBlock"); b != nil {
				b["except"] = slices.DeleteFunc(slices.Clone(sliceAt(b, "except")), func(v any) bool { return drop(str(v)) })
			}
		}
	}
}

// ------------------------------------------------------------------ local stack

// checkLocalStack: the local stack's ZooKeeper refuses sessions without
// digest credentials, stack.sh makes them (0600) and the demo's workers
// and CLI use them.
func checkLocalStack(zooCfg, stack, demo string) []string {
	var p problems
	lines := strings.Split(zooCfg, "\n")
	for _, want := range enforceAuth {
		if !slices.Contains(lines, want) {
			p.add("%s: no line %s", zooCfgPath, want)
		}
	}
	if !regexp.MustCompile(`(?m)^\s*zk_credentials\s*$`).MatchString(stack) {
		p.add("%s: does not make the ZooKeeper credentials (zk_credentials) before it starts ZooKeeper", stackPath)
	}
	if !strings.Contains(stack, `ZK_AUTH="${STACK_DIR}/zk-auth"`) || !regexp.MustCompile(`umask 077 && printf [^\n]*>"\$\{ZK_AUTH\}"`).MatchString(stack) {
		p.add("%s: does not write the credentials to ${STACK_DIR}/zk-auth under umask 077", stackPath)
	}
	if !strings.Contains(demo, `ZK_AUTH_FILE="${STACK_DIR}/zk-auth"`) {
		p.add("%s: ZK_AUTH_FILE is not the stack's ${STACK_DIR}/zk-auth", demoPath)
	}
	workers := regexp.MustCompile(`"\$\{BIN\}/baton-worker"[^\n]*\\\n[^\n]*`).FindAllString(demo, -1)
	if len(workers) == 0 {
		p.add("%s: no baton-worker command line found", demoPath)
	}
	for _, w := range workers {
		if !strings.Contains(w, `--zk-auth-file "${ZK_AUTH_FILE}"`) {
			p.add("%s: a worker starts without --zk-auth-file: %q", demoPath, w)
		}
	}
	if cli := regexp.MustCompile(`(?m)^baton\(\) \{.*$`).FindString(demo); !strings.Contains(cli, `--zk-auth-file "${ZK_AUTH_FILE}"`) {
		p.add("%s: the CLI runs without --zk-auth-file: %q", demoPath, cli)
	}
	return p
}

// checkIgnored: git ignores the secret files' directories.
func checkIgnored(gitignore string) []string {
	var p problems
	lines := strings.Split(gitignore, "\n")
	for _, dir := range []string{composeSecretsDir, k8sSecretsDir} {
		if !slices.Contains(lines, dir) && !slices.Contains(lines, "/"+dir) {
			p.add(".gitignore does not list %s (the secret files make-secrets.sh makes)", dir)
		}
	}
	return p
}
