package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Secrets typed on the command line are warned of, naming the file flag
// to use instead; the file flags alone are not.
func TestArgvSecretsWarning(t *testing.T) {
	cf := &crawlFlags{}
	assert.Empty(t, cf.argvSecretsWarning())
	cf.sf.cookieFile = "/run/secrets/cookies"
	assert.Empty(t, cf.argvSecretsWarning(), "a file flag keeps the secret off the command line")
	cf.cookies = []string{"session=s3cr3t"}
	cf.headers = []string{"X-Api-Key: k"}
	w := cf.argvSecretsWarning()
	assert.Contains(t, w, "--cookie (use --cookie-file)")
	assert.Contains(t, w, "--header (use --header-file)")
	assert.NotContains(t, w, "--authorization")
	assert.NotContains(t, w, "s3cr3t", "the warning never repeats a secret")
}
