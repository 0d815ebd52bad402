package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gload/gload/tokenize/merge"
)

type mergeOptions struct {
	g         *globalOptions
	out       string
	overwrite bool
}

func newMergeCmd(g *globalOptions) *cobra.Command {
	o := &mergeOptions{g: g}
	cmd := &cobra.Command{
		Use:   "merge --out DIR PART...",
		Short: "Join the parts written by gload tokenize --task I/N into one dataset, without re-reading tokens",
		Long: `Hard-links the shards of every part (the parts stay valid) into DIR under their final names, joins the
parts' indexes and writes the dataset's metadata, gload.index last. Rows come in the order of a single run over the
same inputs; the merged dataset and its fingerprint are the same for any N. Parts must be the N tasks of one run:
same inputs, tokenizer and flags, each task once, every task finished, no shard modified since it was written.
Parts and DIR must be on one filesystem.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.out == "" {
				return fmt.Errorf("--out is required")
			}
			s, err := merge.Merge(o.out, args, merge.Options{Overwrite: o.overwrite, Logger: o.g.logger()})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "dataset     %s\n", o.out)
			fmt.Fprintf(w, "parts       %d\n", s.Parts)
			fmt.Fprintf(w, "rows        %d\n", s.Rows)
			fmt.Fprintf(w, "shards      %d\n", s.Shards)
			fmt.Fprintf(w, "fingerprint %s\n", s.Fingerprint)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.out, "out", "", "merged dataset directory")
	cmd.Flags().BoolVar(&o.overwrite, "overwrite", false, "replace an existing output directory")
	return cmd
}
