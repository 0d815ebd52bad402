package readcap

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFile(t *testing.T) {
	dir := t.TempDir()
	l := Limit{Bytes: 1 << 10, Name: "test.Cap"}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zw.Write(make([]byte, 1<<14))
	zw.Close()
	for _, tc := range []struct {
		name, path string
		gunzip     bool
		want       string // "" reads
		tooLarge   bool
	}{
		{"at the cap", write("ok", make([]byte, 1<<10)), false, "", false},
		{"empty", write("empty", nil), false, "", false},
		{"one over", write("over", make([]byte, 1<<10+1)), false, "it holds 1025 bytes, more than 1024 bytes (1 KiB), the limit of test.Cap", true},
		{"device", "/dev/zero", false, "read /dev/zero: file too large: it holds more than 1024 bytes", true},
		{"directory", dir, false, "is a directory", false},
		{"missing", filepath.Join(dir, "nope"), false, "no such file", false},
		{"gzip bomb", write("bomb.gz", bomb.Bytes()), true, "decompressed, it holds more than 1024 bytes", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(tc.path); tc.path == "/dev/zero" && err != nil {
				t.Skip("no /dev/zero")
			}
			data, err := File(tc.path, l)
			if err == nil && tc.gunzip {
				if !IsGzip(data) {
					t.Fatal("not gzip")
				}
				data, err = Gunzip(data, tc.path, l)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(data)) > l.Bytes {
					t.Fatalf("%d bytes read", len(data))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrTooLarge) != tc.tooLarge {
				t.Fatalf("error %v, want one containing %q (ErrTooLarge %v)", err, tc.want, tc.tooLarge)
			}
		})
	}
}
