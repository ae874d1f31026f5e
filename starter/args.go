package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// oneArg is the positional-argument check of a command that takes one
// argument, named name (JOB, NAME) as its Use line shows it: a missing or
// extra argument is a usage error (exit code 2) that names it, where
// cobra's ExactArgs says only "accepts 1 arg(s), received 0".
func oneArg(name, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return usage("missing %s: give %s ('%s')", name, what, useLine(cmd))
		case len(args) > 1:
			return usage("one %s only, got %d (%s): '%s'", name, len(args), strings.Join(quoteAll(args), " "), useLine(cmd))
		}
		return nil
	}
}

// useLine is the command's path with its Use line's arguments.
func useLine(cmd *cobra.Command) string {
	return strings.TrimSuffix(cmd.UseLine(), " [flags]")
}

func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = "'" + a + "'"
		if len(out[i]) > 60 {
			out[i] = out[i][:57] + "...'"
		}
	}
	return out
}
