package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// output is the --output flag of commands whose output is data: a table
// for people (the default) or one JSON document for scripts. Either way
// stdout holds only the data; hints, links and progress go to stderr.
type output string

const (
	outputTable output = "table"
	outputJSON  output = "json"
)

func (o *output) String() string { return string(*o) }

// Set accepts table or json.
func (o *output) Set(v string) error {
	switch output(v) {
	case outputTable, outputJSON:
		*o = output(v)
		return nil
	}
	return fmt.Errorf("want table or json")
}

// Type names the value in the help.
func (o *output) Type() string { return "table|json" }

// JSON reports whether the output is JSON.
func (o *output) JSON() bool { return *o == outputJSON }

// addOutputFlag registers --output on cmd, default table.
func addOutputFlag(cmd *cobra.Command) *output {
	o := outputTable
	cmd.Flags().Var(&o, "output", "output format: table (for people) or json (one JSON document on stdout, for scripts)")
	return &o
}

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
