package corpus

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gload/gload/internal/framedio"
)

// framedBytes compresses data into independent frames: zstd frames of frameBytes, or BGZF blocks.
func framedBytes(t testing.TB, data []byte, codec framedio.Codec, frameBytes int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := framedio.NewWriter(&buf, framedio.WriterOptions{Codec: codec, FrameBytes: frameBytes})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Framed inputs (decoded on several goroutines) read as the same records, at the same lines and positions, as
// the plain file, resume anywhere, and count progress to the file's size.
func TestFramedInputsReadLikePlain(t *testing.T) {
	data := corruptible(nLines)
	dir := t.TempDir()
	plain := writeFile(t, dir, "plain.jsonl", data, CompressNone)
	want, wantPos, err := readAll(t, mustPlan(t, []string{plain}, Options{}), Position{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		codec framedio.Codec
		frame int
	}{{"a.jsonl.zst", framedio.Zstd, 8 << 10}, {"b.jsonl.gz", framedio.BGZF, 0}} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name)
			comp := framedBytes(t, data, c.codec, c.frame)
			if err := os.WriteFile(p, comp, 0o644); err != nil {
				t.Fatal(err)
			}
			fh, _ := os.Open(p)
			st, _ := fh.Stat()
			codec := map[framedio.Codec]framedio.Codec{framedio.Zstd: framedio.Zstd, framedio.BGZF: framedio.Gzip}[c.codec]
			if !framedio.Splittable(fh, st.Size(), codec) {
				t.Fatal("the framed file is not seen as splittable: this test would not test the parallel path")
			}
			fh.Close()
			plan := mustPlan(t, []string{p}, Options{ChunkBytes: 4096})
			got, pos, err := readAll(t, plan, Position{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i].Raw, want[i].Raw) || got[i].Line != want[i].Line || pos[i].Record != wantPos[i].Record {
					t.Fatalf("record %d: %q line %d, want %q line %d", i, got[i].Raw, got[i].Line, want[i].Raw, want[i].Line)
				}
			}
			for _, at := range []int{1, 777, nLines - 1} {
				rest, _, err := readAll(t, plan, pos[at-1])
				if err != nil || len(rest) != nLines-at || !bytes.Equal(rest[0].Raw, want[at].Raw) {
					t.Fatalf("resume after record %d: %d records, err %v", at, len(rest), err)
				}
			}
		})
	}
}

// Damage in a framed file is an error naming the file, the line and the frame's byte offset, after exactly the
// records of the frames before it — never a silently short dataset.
func TestFramedDamageNamesTheFrame(t *testing.T) {
	data := corruptible(nLines)
	for _, c := range []struct {
		name  string
		codec framedio.Codec
	}{{"a.jsonl.zst", framedio.Zstd}, {"a.jsonl.gz", framedio.BGZF}} {
		comp := framedBytes(t, data, c.codec, 16<<10)
		cut := len(comp) / 2
		flipped := slices.Clone(comp)
		flipped[cut] ^= 0x55
		for _, d := range []struct {
			what string
			b    []byte
			want string
		}{
			{"truncated", comp[:cut], "truncated (the file ends inside it)"},
			{"byte flipped", flipped, "frame at byte "},
		} {
			t.Run(c.name+" "+d.what, func(t *testing.T) {
				p := filepath.Join(t.TempDir(), c.name)
				if err := os.WriteFile(p, d.b, 0o644); err != nil {
					t.Fatal(err)
				}
				recs, _, err := readAll(t, mustPlan(t, []string{p}, Options{ChunkBytes: 4096}), Position{})
				var re *ReadError
				if !errors.As(err, &re) || re.Path != p {
					t.Fatalf("after %d records: error %v, want a ReadError for %s", len(recs), err, p)
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, fmt.Sprintf("corpus: %s: line %d: ", p, len(recs)+1)) || !strings.Contains(msg, d.want) {
					t.Fatalf("error %q: want the file, line %d and %q", msg, len(recs)+1, d.want)
				}
				if len(recs) == 0 || len(recs) >= nLines {
					t.Fatalf("%d records before the error (%v): the damage is in the middle", len(recs), err)
				}
				for i, r := range recs {
					if want := corruptibleLine(i); string(r.Raw) != want {
						t.Fatalf("record %d = %q, want %q", i, r.Raw, want)
					}
				}
			})
		}
	}
}
