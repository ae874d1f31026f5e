package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/batoncrawl/baton/roles"
)

func groupOf(runners, backups, want, minBackup int) roles.GroupState {
	g := roles.NewGroupState(want, backups)
	for i := 1; i <= runners; i++ {
		g.CurrentRunner = append(g.CurrentRunner, roles.Name{Base: "sc-crawler", Sep: "_", Index: i}.String())
	}
	for i := runners + 1; i <= runners+backups; i++ {
		g.CurrentBackup = append(g.CurrentBackup, roles.Name{Base: "sc-crawler", Sep: "_", Index: i}.String())
	}
	g.MinBackup = minBackup
	return g
}

// The plan says what the cluster will do, as the roles' rules decide it.
func TestScalePlan(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		g                         roles.GroupState
		promote, stepDown, starts int
		says                      string
	}{
		{"up from backups", groupOf(2, 4, 4, 2), 2, 0, 0, "2 backups will be promoted to runners"},
		{"up, backups kept", groupOf(2, 2, 4, 1), 1, 0, 1, "start 1 more worker"},
		{"down", groupOf(4, 2, 2, 0), 0, 2, 0, "2 runners will step down to backups"},
		{"none", groupOf(2, 1, 2, 0), 0, 0, 0, "no role changes needed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planOf("g", tc.g)
			assert.Equal(t, tc.promote, p.Promote, "promote")
			assert.Equal(t, tc.stepDown, p.StepDown, "step down")
			assert.Equal(t, tc.starts, p.StartWorkers, "start workers")
			var b bytes.Buffer
			printPlan(&b, p)
			assert.Contains(t, b.String(), tc.says)
		})
	}
}
