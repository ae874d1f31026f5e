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

// Seed arguments holding a user:password or a --secret-params value are
// warned of, by count, never by value.
func TestSeedSecretsWarning(t *testing.T) {
	assert.Empty(t, seedSecretsWarning([]string{"https://a.example/?token=t"}, nil), "no parameter named")
	w := seedSecretsWarning([]string{"https://a.example/?token=tok-arg-1", "https://bob:pw-arg-2@b.example/", "https://c.example/"}, []string{"token"})
	assert.Contains(t, w, "2 seed URLs")
	assert.Contains(t, w, "--seeds-file")
	assert.NotContains(t, w, "-arg-")
}
