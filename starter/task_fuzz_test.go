package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// FuzzBuildTask feeds any file to `baton task assign --file`: it is refused
// with a usage error that names the file or the bad field (a Task refused
// for its credentials is accepted with --allow-task-secrets), or it gives a
// fresh Task whose every request is valid and which the Runner's decoder
// reads back exactly as written.
func FuzzBuildTask(f *testing.F) {
	for _, s := range []string{
		`{"running_content":[{"task_id":1,"url":"http://127.0.0.1:8000/a","method":"GET"}]}`,
		`{"running_content":[{"task_id":1,"url":"http://127.0.0.1:8000/a","method":"post","parameters":{"q":"1"},"header":{"X-A":"b"},"body":{"k":[1, 2]}}],"cookie":{"s":"1"},"authorization":{"Bearer":"t"}}`,
		`{"running_content":[{"task_id":1,"url":"http://127.0.0.1/"}],"running_status":"done","next_index":1,"epoch":7,"holder":"x_1"}`,
		`{"running_content":[{"task_id":1,"url":"ftp://x/"}]}`,
		`{"running_content":[{"task_id":1,"url":"http://x/"},{"task_id":1,"url":"http://y/"}]}`,
		`{"running_content":[{"task_id":1,"url":"http://x/","method":"BREW"}]}`,
		`{"running_content":[{"task_id":1,"url":"http://x/"}],"cookie":{"a b":"1"}}`,
		`{"running_content":[{"task_id":1,"url":"http://x/"}],"authorization":{"bearer":"t\r\nX: y"}}`,
		`{"running_content":[]}`, `{"running_content":"http://x/"}`, "", "null", "[]", "{", "\xef\xbb\xbf{}",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(dir, "task.json")
		require.NoError(t, os.WriteFile(file, data, 0o600))
		tk, err := buildTask(file, nil, false)
		if err != nil && strings.Contains(err.Error(), "--allow-task-secrets") {
			// Refused for its credentials alone: the operator may allow them.
			tk, err = buildTask(file, nil, true)
			require.NoError(t, err)
			require.NotEmpty(t, tk.SecretFields())
		}
		if err != nil {
			require.Equal(t, exitcode.Usage, exitcode.Of(err), "%v (%T) is a usage error (exit code 2)", err, err)
			msg := err.Error()
			require.True(t, strings.Contains(msg, file) || strings.Contains(msg, "Task.") ||
				strings.Contains(msg, "running_content"), "the error names the file or the field: %s", msg)
			return
		}
		require.NotEmpty(t, tk.RunningContent)
		require.NoError(t, tk.ValidateRequests())
		require.Equal(t, roles.TaskNothing, tk.RunningStatus, "a fresh assignment starts from the beginning")
		require.Zero(t, tk.NextIndex)
		require.Empty(t, tk.ResultDetail)
		require.Empty(t, tk.Holder)
		back, err := roles.DecodeTask(metadata.Encode(tk))
		require.NoError(t, err, "the Runner reads the Task written")
		require.Equal(t, string(metadata.Encode(tk)), string(metadata.Encode(back)))
	})
}
