package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gload/gload/loader/dataset"
)

type indexOptions struct {
	g        *globalOptions
	indexDir string
	rebuild  bool
}

func newIndexCmd(g *globalOptions) *cobra.Command {
	o := &indexOptions{g: g}
	cmd := &cobra.Command{
		Use:   "index DIR",
		Short: "Check a dataset's shards against gload.index and rewrite the index where needed",
		Long: `Hashes every shard of the dataset in DIR, compares each with gload.index, rebuilds the index entries of shards
that changed (or, with --rebuild, the whole index) and stores the index and a freshness stamp: beside the shards for
a dataset gload wrote, in --index-dir for one Hugging Face wrote (or a directory that cannot be written). An index of
an older format version is upgraded (a valid version 2 index is read in full and rewritten as version 3 without
scanning the shards). Every row length of the index is checked against its block table, its shards' token counts
and the content fingerprint; a corrupt index is rebuilt from the shards. Prints the content fingerprint, which
copies of the dataset share (an upgrade keeps it).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.OutOrStdout(), args[0])
		},
	}
	cmd.Flags().StringVar(&o.indexDir, "index-dir", dataset.DefaultIndexDir(), "index cache for datasets without their own gload.index")
	cmd.Flags().BoolVar(&o.rebuild, "rebuild", false, "ignore the existing index and rebuild it from the shards")
	return cmd
}

func (o *indexOptions) run(w io.Writer, dir string) error {
	ds, err := dataset.Open(dir, dataset.OpenOptions{
		RebuildIndex: o.rebuild, WriteIndex: true, Verify: true, IndexDir: o.indexDir, Logger: o.g.logger(),
	})
	if err != nil {
		return err
	}
	defer ds.Close()
	fmt.Fprintf(w, "dataset     %s\n", dir)
	fmt.Fprintf(w, "rows        %d\n", ds.Len())
	fmt.Fprintf(w, "tokens      %d\n", ds.TotalTokens())
	fmt.Fprintf(w, "shards      %d hashed, %d re-indexed\n", ds.ShardsVerified(), ds.ShardsScanned())
	upgraded := ""
	if ds.IndexUpgraded() {
		upgraded = ", upgraded from an older format version"
	}
	fmt.Fprintf(w, "index       version %d, %d blocks of %d rows, every length checked%s\n",
		dataset.IndexVersion, ds.LengthSource().NumBlocks(), dataset.BlockRows, upgraded)
	fmt.Fprintf(w, "fingerprint %s\n", ds.Fingerprint())
	return nil
}
