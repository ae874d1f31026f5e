package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/testsuite"
)

// `baton task assign` refuses a Task that holds credentials, which the
// reference's layout would keep in clear in the Task znode, before it
// connects to anything (exit 2, naming the fields, never the values),
// unless --allow-task-secrets; the reference's Task file still decodes.
func TestTaskAssignRefusesSecrets(t *testing.T) {
	file := filepath.Join(t.TempDir(), "task.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"running_content": [{"task_id": 0, "url": "http://127.0.0.1:8000/page/1.html",
	  "method": "GET", "parameters": {"q": "x"}, "header": {"Accept": "text/html", "X-Api-Key": "hdr-value"}, "body": null}],
	  "cookie": {"session": "cookie-value"}, "authorization": {"Bearer": "auth-value"}}`), 0o600))

	_, err := buildTask(file, nil, false)
	require.Error(t, err)
	assert.Equal(t, exitcode.Usage, exitcode.Of(err))
	for _, want := range []string{`Task.cookie["session"]`, `Task.authorization["Bearer"]`,
		`Task.running_content[0].header["X-Api-Key"]`, "in clear in its Task znode", "baton crawl", "--allow-task-secrets"} {
		assert.Contains(t, err.Error(), want)
	}
	for _, v := range []string{"hdr-value", "cookie-value", "auth-value"} {
		assert.NotContains(t, err.Error(), v)
	}

	tk, err := buildTask(file, nil, true)
	require.NoError(t, err, "the reference's Task file, allowed")
	assert.Equal(t, "cookie-value", tk.Cookie["session"])
	assert.Equal(t, "auth-value", tk.Authorization["Bearer"])

	_, err = buildTask("", []string{"http://127.0.0.1:8000/a", "http://127.0.0.1:8000/b"}, false)
	require.NoError(t, err, "no credentials: nothing to allow")

	// From the command line: refused before ZooKeeper is dialled (it is
	// not there), naming the URL's credentials but not showing them.
	global := []string{"--zk-hosts", testsuite.ClosedPort(t), "--connect-timeout", "1s"}
	_, errw, code := run(t, append(global, "task", "assign", "--node", "sc-crawler_1",
		"--url", "https://someone:url-password@example.org/")...)
	assert.Equal(t, exitcode.Usage, code, errw)
	assert.Contains(t, errw, "Task.running_content[0].url (user:password)")
	assert.NotContains(t, errw, "url-password")
	_, errw, code = run(t, append(global, "task", "assign", "--node", "sc-crawler_1", "--allow-task-secrets",
		"--url", "https://someone:url-password@example.org/")...)
	assert.Equal(t, exitcode.Unavailable, code, "allowed: it goes on to ZooKeeper: %s", errw)
	assert.Contains(t, errw, "stored in clear in the Task znode")
}
