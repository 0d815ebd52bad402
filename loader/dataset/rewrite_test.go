package dataset

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// TestOffsetsRewrittenUnderReader: a shard whose list offsets are rewritten
// in place (same size, as ../shared/repro/shiftoffs.py does) after its record
// batches were decoded and cached gives errors wrapping ErrCorrupt that name
// the shard, never an out-of-range slice (which took the server down).
func TestOffsetsRewrittenUnderReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(offs []int32)
	}{
		{"shifted by 2^30", func(o []int32) {
			for i := range o {
				o[i] += 0x40000000
			}
		}},
		{"decreasing", func(o []int32) {
			for i := range o {
				o[i] = int32(len(o) - i)
			}
		}},
		{"negative", func(o []int32) {
			for i := range o {
				o[i] = -1 - int32(i)
			}
		}},
		{"last beyond the values", func(o []int32) { o[len(o)-1] += 1 << 20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rows := genRows(60, 0, 20, 11)
			writeDataset(t, dir, rows, WriterOptions{RowsPerBatch: 16}, 60)
			d, err := Open(dir, OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			for i := range d.Len() {
				if _, err := d.Tokens(i); err != nil { // decodes and caches every batch
					t.Fatal(err)
				}
			}
			sh := d.shards[0]
			f, err := os.OpenFile(sh.path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for j := range sh.cache {
				b, err := sh.batch(j)
				if err != nil {
					t.Fatal(err)
				}
				at := int64(uintptr(unsafe.Pointer(unsafe.SliceData(b.offs))) - uintptr(unsafe.Pointer(unsafe.SliceData(sh.data))))
				n := int(b.rows) + 1
				offs := make([]int32, n)
				for i := range offs {
					offs[i] = int32(binary.LittleEndian.Uint32(b.offs[4*i:]))
				}
				tc.edit(offs)
				buf := make([]byte, 4*n)
				for i, o := range offs {
					binary.LittleEndian.PutUint32(buf[4*i:], uint32(o))
				}
				if _, err := f.WriteAt(buf, at); err != nil { // the shared mapping sees it
					t.Fatal(err)
				}
			}
			bad := 0
			for i := range d.Len() {
				for _, read := range []func() error{
					func() error { _, err := d.Tokens(i); return err },
					func() error { _, err := d.AppendTokens(nil, i); return err },
					func() error { _, _, err := d.Column("none", i); return err },
				} {
					err := read()
					if err == nil {
						continue
					}
					if errors.Is(err, ErrNoColumn) {
						continue
					}
					if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrStaleIndex) || !strings.Contains(err.Error(), sh.path) {
						t.Fatalf("row %d: %v; want ErrCorrupt naming %s", i, err, sh.path)
					}
					bad++
				}
			}
			if bad == 0 {
				t.Fatal("no read noticed the rewritten offsets")
			}
		})
	}
}
