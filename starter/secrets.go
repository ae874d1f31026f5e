package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/batoncrawl/baton/activities/jobs"
)

// EnvProxyCredentials holds the proxy's user:password for `baton crawl
// --proxy` (kept off the command line, where ps and shell histories show it).
const EnvProxyCredentials = "BATON_PROXY_CREDENTIALS"

// secretFlags are a crawl's secret inputs read from files: values never on
// the command line, never echoed in an error.
type secretFlags struct {
	cookieFile, authFile, headerFile, keyFile string
}

func (s *secretFlags) add(f *pflag.FlagSet) {
	f.StringVar(&s.cookieFile, "cookie-file", "", "read cookies from FILE: name=value per line ('#' comments); kept off the command line")
	f.StringVar(&s.authFile, "auth-file", "", "read authorization from FILE: Bearer=TOKEN, Basic=B64 or Header=value per line ('#' comments)")
	f.StringVar(&s.headerFile, "header-file", "", "read request headers from FILE: 'Name: value' per line ('#' comments)")
	f.StringVar(&s.keyFile, "secrets-key-file", "", "the group's private secrets key (default <data-dir>/secrets.key, the workers' one); without it, a job's secrets are sealed for the group's public key the workers publish in ZooKeeper. Either way they go sealed into the job store, never into the workflow")
}

// readSecretFile reads lines of name SEP value. An error names the file and
// the line number, never the line.
func readSecretFile(flag, path, sep string) (map[string]string, error) {
	out := map[string]string{}
	if path == "" {
		return out, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, usage("--%s: %v", flag, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, sep)
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, usage("--%s %s line %d: want name%svalue (the line is not shown: it may hold a secret)", flag, path, n, sep)
		}
		if sep == ":" {
			v = strings.TrimSpace(v)
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, usage("--%s %s: %v", flag, path, err)
	}
	return out, nil
}

// merge adds from's entries to into (a flag's over a file's).
func merge(into, from map[string]string) map[string]string {
	if into == nil {
		into = map[string]string{}
	}
	for k, v := range from {
		if _, ok := into[k]; !ok {
			into[k] = v
		}
	}
	return into
}

// keyPath is the secrets key file the CLI seals with.
func (s *secretFlags) keyPath(st *storeFlags) string {
	if s.keyFile != "" {
		return s.keyFile
	}
	return filepath.Join(st.dataDir, jobs.DefaultSecretsKeyFile)
}

// storeSecrets seals a job's secrets for the group's key into the job
// store, before the job is submitted.
func storeSecrets(ctx context.Context, g *globals, tf *temporalFlags, sf *secretFlags, job string, sec jobs.Secrets) error {
	sealer, err := groupSealer(ctx, g, sf.keyPath(&tf.st), sec)
	if err != nil {
		return err
	}
	sealed, err := sealer.Seal(job, sec)
	if err != nil {
		return err
	}
	js, err := tf.st.open(ctx, g)
	if err != nil {
		return fmt.Errorf("a job's secrets are sealed into the workers' job store: %w", err)
	}
	defer js.Close()
	return js.PutSecrets(ctx, job, sealer.KeyID(), sealed)
}

// groupSealer is what the CLI seals with: the key file at path when there
// is one (checked against the group's key: secrets no Runner can open
// would fail the job later), else the group's public key, which its
// workers publish in ZooKeeper (a submitter needs no private key).
func groupSealer(ctx context.Context, g *globals, path string, sec jobs.Secrets) (*jobs.Sealer, error) {
	sealer, err := jobs.LoadSecretsKey(path)
	if err != nil && !errors.Is(err, jobs.ErrNoSecretsKey) {
		return nil, usage("%v", err)
	}
	c, closeZK, zerr := g.dialWithin(ctx, min(3*time.Second, g.connectTimeout))
	if zerr == nil {
		defer closeZK()
	}
	if sealer != nil {
		if zerr == nil {
			p := jobs.SecretsKeyPath(g.zk.Root, g.group)
			if data, _, gerr := c.Store.Get(ctx, p); gerr == nil {
				if err := jobs.CheckSecretsKey(g.group, p, data, sealer.KeyID()); err != nil {
					return nil, usage("%v", err)
				}
			}
		}
		return sealer, nil
	}
	if zerr == nil {
		p := jobs.SecretsPublicKeyPath(g.zk.Root, g.group)
		if data, _, gerr := c.Store.Get(ctx, p); gerr == nil {
			return jobs.ParsePublicSecretsKey(p, data)
		}
	}
	return nil, usage("the job has secrets (%s) and there is no secrets key at %s nor a public key of group %s in ZooKeeper: "+
		"start a worker of the group once (it publishes the group's public key), or give the workers' key with --secrets-key-file",
		strings.Join(sec.Names(), ", "), path, g.group)
}
