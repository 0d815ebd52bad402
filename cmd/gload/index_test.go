package main

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gload/gload/loader/dataset"
)

// toIndexV2 re-encodes a version-3 gload.index as version 2 (the same header and shard entries, then the lengths
// and a crc32c of the whole file).
func toIndexV2(t *testing.T, b []byte) []byte {
	t.Helper()
	u32 := func(p int) int { return int(binary.LittleEndian.Uint32(b[p:])) }
	p := 12 + 4 + u32(12) + 32
	n := u32(p)
	p += 4
	for range n {
		p += 4 + u32(p) + 8 + 32 + 16
		p += 4 + 16*u32(p)
	}
	rowsAt := p
	lengthsAt := int(binary.LittleEndian.Uint64(b[rowsAt+16:]))
	v2 := append([]byte(nil), b[:rowsAt+8]...)
	binary.LittleEndian.PutUint32(v2[8:], 2)
	for len(v2)%4 != 0 {
		v2 = append(v2, 0)
	}
	v2 = append(v2, b[lengthsAt:]...)
	return binary.LittleEndian.AppendUint32(v2, crc32.Checksum(v2, crc32.MakeTable(crc32.Castagnoli)))
}

// TestIndexUpgradesV2: a version-2 index is refused by ReadIndex with the way out; `gload index DIR` rewrites it as
// version 3 from its own lengths (no shard re-indexed) and keeps the fingerprint.
func TestIndexUpgradesV2(t *testing.T) {
	dir := t.TempDir()
	writeServeDataset(t, dir, 300)
	fpRE := regexp.MustCompile(`(?m)^fingerprint (\S+)$`)
	out, errOut, code := gload(t, "", "index", dir)
	if code != 0 || !strings.Contains(out, "index       version 3, 1 blocks") || strings.Contains(out, "upgraded") {
		t.Fatalf("gload index: exit %d\n%s%s", code, out, errOut)
	}
	fp := fpRE.FindStringSubmatch(out)[1]
	path := filepath.Join(dir, dataset.IndexFile)
	v3, _ := os.ReadFile(path)
	if err := os.WriteFile(path, toIndexV2(t, v3), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.ReadIndex(dir); !errors.Is(err, dataset.ErrOldIndex) || !strings.Contains(err.Error(), "gload index DIR") {
		t.Fatalf("ReadIndex of version 2: %v", err)
	}
	out, errOut, code = gload(t, "", "index", dir)
	if code != 0 || !strings.Contains(out, "upgraded from an older format version") || !strings.Contains(out, "0 re-indexed") ||
		fpRE.FindStringSubmatch(out)[1] != fp {
		t.Fatalf("gload index of version 2: exit %d (fingerprint was %s)\n%s%s", code, fp, out, errOut)
	}
	if got, _ := os.ReadFile(path); string(got) != string(v3) {
		t.Error("the upgraded index is not the version 3 index gload wrote")
	}
}
