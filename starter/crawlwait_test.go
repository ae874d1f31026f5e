package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
)

// The no-Runner countdown of crawl --wait stops while Temporal is away and
// for temporalRecovery after it is back, unless the workers answer first.
func TestTemporalWatchHoldsTheRunnerCountdown(t *testing.T) {
	var out strings.Builder
	now := time.Now()
	tw := temporalWatch{w: &out, job: "j"}
	assert.False(t, tw.holding(now), "no outage")

	tw.down, tw.outage = true, true // as observe sets them when health fails
	assert.True(t, tw.holding(now.Add(time.Hour)), "while Temporal is away")

	tw.down, tw.backAt = false, now // Temporal back, workers not yet
	assert.True(t, tw.holding(now.Add(temporalRecovery-time.Second)))
	assert.False(t, tw.holding(now.Add(temporalRecovery)), "the recovery allowance is bounded")

	tw.observe(context.Background(), nil, nil, now) // a query answered
	assert.False(t, tw.holding(now))
	assert.Contains(t, out.String(), "answer again")
}

func TestTransientErrors(t *testing.T) {
	assert.True(t, transient(fmt.Errorf("get: %w", serviceerror.NewUnavailable("down"))))
	assert.True(t, transient(serviceerror.NewDeadlineExceeded("slow")))
	assert.True(t, transient(fmt.Errorf("poll: %w", context.DeadlineExceeded)))
	assert.False(t, transient(temporal.NewApplicationError("job failed", "x")))
	assert.False(t, transient(errors.New("workflow canceled")))
	assert.Equal(t, "my-job", jobOf("baton-job/g/my-job"))
}
