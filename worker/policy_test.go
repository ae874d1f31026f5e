package worker

import (
	"fmt"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// --allow-net and --deny-net make the worker's address policy; a bad
// range names its flag.
func TestPolicyFlags(t *testing.T) {
	cfg := DefaultConfig()
	fs := pflag.NewFlagSet("w", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--deny-private", "--allow-net", "10.1.0.0/16,10.2.0.7", "--deny-net", "169.254.169.254"}))
	p, err := cfg.Policy()
	require.NoError(t, err)
	require.True(t, p.DenyPrivate)
	require.Equal(t, "[10.1.0.0/16 10.2.0.7/32] [169.254.169.254/32]", fmt.Sprint(p.Allow, p.Deny))

	cfg.DenyNets = []string{"10.0.0.0/99"}
	cfg.Name = "w_1"
	require.ErrorContains(t, cfg.Validate(), "--deny-net: address range \"10.0.0.0/99\"")
}
