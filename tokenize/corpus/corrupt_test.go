package corpus

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestCraftedBinaryInputs reads crafted Arrow and Parquet files (found by
// trying to break gload; testdata/corrupt) with every column kept: each must
// give an error naming the file, at plan time or while reading, never a
// panic or an allocation sized by a forged count.
func TestCraftedBinaryInputs(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		// a 2.3 KB stream whose schema claims 2^32 custom metadata entries
		{"oom.arrow", "does not fit"},
		// a column chunk with a negative length (arrow-go: makeslice panic in a goroutine)
		{"makeslice.parquet", "column chunk"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			p := filepath.Join("testdata", "corrupt", tc.file)
			o := Options{KeepColumns: []string{"id", "meta", "tags"}}
			plan, err := NewPlan([]string{p}, o)
			if err == nil {
				var r *Reader
				if r, err = plan.Open(Position{}); err == nil {
					defer r.Close()
					for err == nil {
						_, err = r.Next()
					}
				}
			}
			if err == nil || errors.Is(err, io.EOF) {
				t.Fatalf("read to the end without an error")
			}
			if !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %s and say %q", err, p, tc.want)
			}
		})
	}
}
