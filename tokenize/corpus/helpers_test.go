package corpus

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// compressBytes returns data compressed for comp.
func compressBytes(t testing.TB, data []byte, comp Compression) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch comp {
	case CompressNone:
		return data
	case CompressGzip:
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	case CompressZstd:
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := zw.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("bad compression %q", comp)
	}
	return buf.Bytes()
}

var extOf = map[Compression]string{CompressNone: "", CompressGzip: ".gz", CompressZstd: ".zst"}

// writeFile writes data (compressed for comp) to dir/name+ext and returns the path.
func writeFile(t testing.TB, dir, name string, data []byte, comp Compression) string {
	t.Helper()
	p := filepath.Join(dir, name+extOf[comp])
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, compressBytes(t, data, comp), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// readAll reads every record of a plan from pos.
func readAll(t testing.TB, p *Plan, from Position) ([]Record, []Position, error) {
	t.Helper()
	r, err := p.Open(from)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	var recs []Record
	var pos []Position
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			if r.BytesRead() != p.TotalBytes {
				t.Errorf("BytesRead at EOF = %d, want %d", r.BytesRead(), p.TotalBytes)
			}
			return recs, pos, nil
		}
		if err != nil {
			return recs, pos, err
		}
		recs = append(recs, rec)
		pos = append(pos, r.Pos())
		if rec.Pos() != r.Pos() {
			t.Errorf("Record.Pos %+v != Reader.Pos %+v", rec.Pos(), r.Pos())
		}
	}
}

func mustPlan(t testing.TB, paths []string, o Options) *Plan {
	t.Helper()
	p, err := NewPlan(paths, o)
	if err != nil {
		t.Fatalf("NewPlan: %v", err)
	}
	return p
}

// docs extracts the texts of recs (skips as "SKIP:<reason>").
func docs(recs []Record, o Options) []string {
	e := NewExtractor(o)
	var out []string
	for _, r := range recs {
		d, s := e.Extract(r)
		if s != nil {
			out = append(out, "SKIP:"+s.Reason.String())
			continue
		}
		out = append(out, d.Text)
	}
	return out
}
