package main

// gload compress: rewrites a corpus file as independent frames (multi-frame zstd or BGZF gzip) so that
// `gload tokenize` decompresses one big file on several cores (package framedio).

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gload/gload/internal/framedio"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/spf13/cobra"
)

type compressOptions struct {
	out        string
	codec      string
	level      int
	frameBytes string
	workers    int
	quiet      bool
}

func newCompressCmd(g *globalOptions) *cobra.Command {
	o := &compressOptions{}
	cmd := &cobra.Command{
		Use:   "compress --out FILE.zst|FILE.gz INPUT|-",
		Short: "Recompress a corpus file into independent frames that gload tokenize decompresses on several cores",
		Long: `Reads INPUT (plain, .gz or .zst, decompressed on the fly; - for stdin) and writes it as independent frames:
zstd frames of --frame-bytes input each (default 4 MiB; every frame states its size), or BGZF gzip blocks
(--codec bgzf; 64 KiB each, as htslib's bgzip writes them). Both are ordinary files for zstd, gzip and zcat.

One .jsonl.gz or single-frame .jsonl.zst is decompressed by one core, which caps gload tokenize near
130 MB/s of JSON Lines on gzip; a framed file is decoded on up to eight cores (as many as there are), in order,
byte-identical.
The output appears under its name only when complete.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	f := cmd.Flags()
	f.StringVar(&o.out, "out", "", "output file (.zst for zstd, .gz for bgzf)")
	f.StringVar(&o.codec, "codec", "", "zstd or bgzf (default: by --out's extension)")
	f.IntVar(&o.level, "level", 0, "compression level: zstd 1-4 (default 2), bgzf 1-9 (default 6)")
	f.StringVar(&o.frameBytes, "frame-bytes", "4MiB", "zstd: input bytes per frame (at most 16MiB)")
	f.IntVar(&o.workers, "workers", 0, "frames compressed at once (default: all cores)")
	f.BoolVar(&o.quiet, "quiet", false, "no progress lines")
	_ = g
	return cmd
}

func (o *compressOptions) run(cmd *cobra.Command, input string) error {
	if o.out == "" {
		return fmt.Errorf("--out is required")
	}
	codec := framedio.Codec(o.codec)
	switch {
	case o.codec == "" && strings.HasSuffix(o.out, ".zst"):
		codec = framedio.Zstd
	case o.codec == "" && strings.HasSuffix(o.out, ".gz"):
		codec = framedio.BGZF
	case o.codec == "":
		return fmt.Errorf("--out %s: name it .zst or .gz, or give --codec zstd|bgzf", o.out)
	}
	frame, err := parseSize(o.frameBytes)
	if err != nil {
		return fmt.Errorf("--frame-bytes: %w", err)
	}
	in, closeIn, err := openPlainInput(cmd, input)
	if err != nil {
		return err
	}
	defer closeIn()
	tmp, err := os.CreateTemp(filepath.Dir(o.out), "."+filepath.Base(o.out)+".partial-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	w, err := framedio.NewWriter(bw, framedio.WriterOptions{Codec: codec, Level: o.level, FrameBytes: int(frame), Workers: o.workers})
	if err != nil {
		tmp.Close()
		return err
	}
	t0 := time.Now()
	pr := &progressReader{r: in, w: cmd.ErrOrStderr(), quiet: o.quiet, t0: t0}
	n, err := io.Copy(w, pr)
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("compress %s → %s: %w", input, o.out, err)
	}
	if err := os.Rename(tmp.Name(), o.out); err != nil {
		return err
	}
	st, _ := os.Stat(o.out)
	secs := time.Since(t0).Seconds()
	fmt.Fprintf(cmd.OutOrStdout(), "compressed %s (%.1f MB) → %s (%.1f MB, %s frames) in %.1f s = %.0f MB/s\n",
		input, float64(n)/1e6, o.out, float64(st.Size())/1e6, codec, secs, float64(n)/1e6/max(secs, 1e-9))
	return nil
}

// openPlainInput opens input (a path or - for stdin), decompressing .gz/.zst inputs (found by their magic
// bytes).
func openPlainInput(cmd *cobra.Command, input string) (io.Reader, func(), error) {
	var raw io.Reader
	closeFn := func() {}
	if input == "-" {
		raw = cmd.InOrStdin()
	} else {
		fh, err := os.Open(input)
		if err != nil {
			return nil, nil, err
		}
		raw, closeFn = fh, func() { fh.Close() }
	}
	br := bufio.NewReaderSize(raw, 1<<20)
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			closeFn()
			return nil, nil, fmt.Errorf("%s: %w", input, err)
		}
		return zr, closeFn, nil
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br)
		if err != nil {
			closeFn()
			return nil, nil, fmt.Errorf("%s: %w", input, err)
		}
		return zr, func() { zr.Close(); closeFn() }, nil
	}
	return br, closeFn, nil
}

// progressReader prints the (decompressed) input read so far, every 2 s.
type progressReader struct {
	r     io.Reader
	n     int64
	w     io.Writer
	quiet bool
	t0    time.Time
	last  time.Time
}

func (p *progressReader) Read(b []byte) (int, error) {
	k, err := p.r.Read(b)
	p.n += int64(k)
	if now := time.Now(); !p.quiet && now.Sub(p.last) >= 2*time.Second {
		if !p.last.IsZero() {
			fmt.Fprintf(p.w, "compress: %.0f MB read, %.0f MB/s\n", float64(p.n)/1e6, float64(p.n)/1e6/now.Sub(p.t0).Seconds())
		}
		p.last = now
	}
	return k, err
}
