package corpus

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

type readRec struct {
	line int64
	raw  string
	kind Kind
}

func readPieces(t *testing.T, p *Plan, from Position) []readRec {
	t.Helper()
	r, err := p.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []readRec
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, readRec{rec.Line, string(rec.Raw), rec.Kind})
	}
}

// TestPieces: large plain line files are cut right after the first '\n' at or
// after each multiple of the piece size minus one (a record straddling a
// multiple stays in the earlier piece); the pieces read the records of the
// whole file with the whole file's line numbers, from the start or opened
// at any piece or position on their own.
func TestPieces(t *testing.T) {
	cases := []struct {
		name  string
		data  string
		split int64
		ext   string
		comp  Compression
		docs  DocPer
		want  []int64 // piece offsets; nil: read whole
	}{
		{"below the size", "aaaa\nbbbb\n", 10, ".jsonl", CompressNone, "", nil},
		{"cut exactly at a multiple", "aaaa\nbbbb\ncccc\n", 5, ".txt", CompressNone, "", []int64{0, 5, 10}},
		{"straddling record to the earlier piece", "aaaaaa\nbb\ncccccc\n", 5, ".txt", CompressNone, "", []int64{0, 7, 10}},
		{"no newline after the last record", "aaaa\nbbbb\ncc", 5, ".txt", CompressNone, "", []int64{0, 5, 10}},
		{"last multiple inside the last record", "aaaa\nbbbbbbb", 5, ".txt", CompressNone, "", []int64{0, 5}},
		{"crlf", "aaa\r\nbbb\r\nccc\r\n", 5, ".txt", CompressNone, "", []int64{0, 5, 10}},
		{"record longer than the piece size, straddling", "a\n" + strings.Repeat("x", 23) + "\nb\nc\n", 5, ".txt", CompressNone, "", []int64{0, 26}},
		{"record longer than the piece size, a piece of its own", "aaaa\n" + strings.Repeat("x", 23) + "\nb\n", 5, ".txt", CompressNone, "", []int64{0, 5, 29}},
		{"blank and empty lines", "\n\n\n\n\nbbbb\n\n\n\n\n", 5, ".txt", CompressNone, "", []int64{0, 5, 10}},
		{"jsonl with bom", "\xef\xbb\xbf{\"text\":\"a\"}\n{\"text\":\"b\"}\n{\"text\":\"c\"}\n", 14, ".jsonl", CompressNone, "", []int64{0, 16, 29}},
		{"gzip stays whole", "aaaa\nbbbb\ncccc\n", 5, ".txt", CompressGzip, "", nil},
		{"doc per file stays whole", "aaaa\nbbbb\ncccc\n", 5, ".txt", CompressNone, DocPerFile, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeFile(t, dir, "in"+tc.ext, []byte(tc.data), tc.comp)
			whole, err := NewPlan([]string{path}, Options{DocPer: tc.docs})
			if err != nil {
				t.Fatal(err)
			}
			split, err := NewPlan([]string{path}, Options{DocPer: tc.docs, SplitBytes: tc.split})
			if err != nil {
				t.Fatal(err)
			}
			var offs []int64
			var total int64
			for i, f := range split.Files {
				if f.Piece > 0 {
					offs = append(offs, f.Offset)
					if f.Piece != i+1 || f.Offset != total || f.Size == 0 {
						t.Fatalf("piece %d: %+v (bytes before %d)", i, f, total)
					}
				}
				total += f.Size
			}
			if !slices.Equal(offs, tc.want) || total != whole.TotalBytes || split.TotalBytes != total {
				t.Fatalf("piece offsets %v (bytes %d, plan %d), want %v (bytes %d)", offs, total, split.TotalBytes, tc.want, whole.TotalBytes)
			}
			for i, f := range split.Files[1:] {
				if f.Piece > 0 && tc.data[f.Offset-1] != '\n' {
					t.Fatalf("piece %d starts at %d, not after a line end", i+1, f.Offset)
				}
			}
			want := readPieces(t, whole, Position{})
			if got := readPieces(t, split, Position{}); !slices.Equal(got, want) {
				t.Fatalf("pieces read\n%v\nwhole file read\n%v", got, want)
			}
			// Opened at any piece on its own (a task), or at any position (a resume), the
			// records and their line numbers are the whole file's.
			r, _ := split.Open(Position{})
			var positions []Position
			for {
				rec, err := r.Next()
				if err != nil {
					break
				}
				positions = append(positions, rec.Pos())
			}
			r.Close()
			for k, pos := range positions {
				if got := readPieces(t, split, pos); !slices.Equal(got, want[k+1:]) {
					t.Fatalf("resumed at %+v: %v, want %v", pos, got, want[k+1:])
				}
			}
			for i := range split.Files {
				sub := *split
				sub.Files = split.Files[i:]
				got := readPieces(t, &sub, Position{})
				k := 0 // a file read whole: all of it
				if f := split.Files[i]; f.Piece > 0 {
					firstLine := int64(strings.Count(tc.data[:f.Offset], "\n")) + 1
					if k = slices.IndexFunc(want, func(r readRec) bool { return r.line >= firstLine }); k < 0 {
						k = len(want)
					}
				}
				if !slices.Equal(got, want[k:]) {
					t.Fatalf("opened at file %d: %v, want %v", i, got, want[k:])
				}
			}
		})
	}
}

// FuzzPieces: for any bytes and piece size, the pieces tile the file, start
// after line ends, and read the whole file's records with its line numbers.
func FuzzPieces(f *testing.F) {
	f.Add([]byte("aaaa\nbbbb\ncccc\n"), uint8(5))
	f.Add([]byte("a\r\n\n\nxxxxxxxxxxxxxxxxxxxx\nb"), uint8(3))
	f.Add([]byte("\xef\xbb\xbfline\n"), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, split uint8) {
		if split == 0 {
			return
		}
		path := writeFile(t, t.TempDir(), "in.txt", data, CompressNone)
		whole, err := NewPlan([]string{path}, Options{})
		if err != nil {
			return
		}
		pieces, err := NewPlan([]string{path}, Options{SplitBytes: int64(split)})
		if err != nil {
			t.Fatal(err)
		}
		var at int64
		for _, p := range pieces.Files {
			if p.Offset != at || p.Size <= 0 && len(data) > 0 || (p.Offset > 0 && data[p.Offset-1] != '\n') {
				t.Fatalf("piece %+v after %d bytes", p, at)
			}
			at += p.Size
		}
		if at != int64(len(data)) {
			t.Fatalf("pieces hold %d of %d bytes", at, len(data))
		}
		if got, want := readPieces(t, pieces, Position{}), readPieces(t, whole, Position{}); !slices.Equal(got, want) {
			t.Fatalf("pieces read %v, whole file %v", got, want)
		}
	})
}
