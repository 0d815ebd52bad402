package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestNewLayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		need Need
		want Layout
		bad  bool
	}{
		{"empty", Need{}, Layout{SlotBytes: SlotAlign}, false},
		{"bucketed 16x1024", Need{Cells: 16 * 1024, Rows: 16, Pieces: 16},
			Layout{InputIDs: 0, PositionIDs: 65536, Lengths: 65536, Index: 65600, CuSeqlens: 65728, Labels: 65728, SlotBytes: 69632}, false},
		{"bucketed 16x1024 with labels", Need{Cells: 16 * 1024, Rows: 16, Pieces: 16, Labels: true},
			Layout{InputIDs: 0, PositionIDs: 65536, Lengths: 65536, Index: 65600, CuSeqlens: 65728, Labels: 65728, SlotBytes: 135168}, false},
		{"packed 2x512", Need{Cells: 1024, Rows: 2, Pieces: 9, CuLen: 12, Positions: true},
			Layout{InputIDs: 0, PositionIDs: 4096, Lengths: 8192, Index: 8256, CuSeqlens: 8384, Labels: 8448, SlotBytes: 12288}, false},
		{"packed 2x512 with labels", Need{Cells: 1024, Rows: 2, Pieces: 9, CuLen: 12, Positions: true, Labels: true},
			Layout{InputIDs: 0, PositionIDs: 4096, Lengths: 8192, Index: 8256, CuSeqlens: 8384, Labels: 8448, SlotBytes: 16384}, false},
		{"odd sizes align", Need{Cells: 3, Rows: 3, Pieces: 3},
			Layout{InputIDs: 0, PositionIDs: 64, Lengths: 64, Index: 128, CuSeqlens: 192, Labels: 192, SlotBytes: 4096}, false},
		{"negative", Need{Cells: -1}, Layout{}, true},
		{"overflow", Need{Cells: 1 << 62}, Layout{}, true},
		{"too large", Need{Cells: MaxSlotBytes / 4, Rows: 1}, Layout{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewLayout(tc.need)
			if tc.bad {
				if !errors.Is(err, ErrLayout) {
					t.Fatalf("NewLayout(%+v) = %+v, %v; want ErrLayout", tc.need, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("NewLayout(%+v) = %+v, %v; want %+v", tc.need, got, err, tc.want)
			}
			for _, off := range []int64{got.InputIDs, got.Lengths, got.Index, got.PositionIDs, got.CuSeqlens, got.Labels} {
				if off%BufferAlign != 0 || off > got.SlotBytes {
					t.Fatalf("offset %d not aligned or outside the slot", off)
				}
			}
		})
	}
}

func TestParseName(t *testing.T) {
	for _, tc := range []struct {
		in    string
		pid   int
		start uint64
		ok    bool
	}{
		{"gload-123-456-0123456789abcdef.ring", 123, 456, true},
		{"gload-1-0-ffffffffffffffff.ring", 1, 0, true},
		{"gload-0-1-0123456789abcdef.ring", 0, 0, false},
		{"gload--1-1-0123456789abcdef.ring", 0, 0, false},
		{"gload-1-1-0123456789abcde.ring", 0, 0, false},
		{"gload-1-1-0123456789abcdeg.ring", 0, 0, false},
		{"gload-1-1-0123456789abcdef", 0, 0, false},
		{"gload-1-1-0123456789abcdef.ring.tmp", 0, 0, false},
		{"gload-x-1-0123456789abcdef.ring", 0, 0, false},
		{"gload-1-1-2-0123456789abcdef.ring", 0, 0, false},
		{"gload-99999999999-1-0123456789abcdef.ring", 0, 0, false},
		{"other-1-1-0123456789abcdef.ring", 0, 0, false},
		{"gload-+1-1-0123456789abcdef.ring", 0, 0, false},
	} {
		pid, start, ok := ParseName(tc.in)
		if pid != tc.pid || start != tc.start || ok != tc.ok {
			t.Errorf("ParseName(%q) = %d, %d, %v; want %d, %d, %v", tc.in, pid, start, ok, tc.pid, tc.start, tc.ok)
		}
	}
	name, err := ringName(42, 7)
	if err != nil {
		t.Fatal(err)
	}
	if pid, start, ok := ParseName(name); pid != 42 || start != 7 || !ok {
		t.Fatalf("ParseName(ringName(42, 7) = %q) = %d, %d, %v", name, pid, start, ok)
	}
}

func FuzzParseName(f *testing.F) {
	f.Add("gload-123-456-0123456789abcdef.ring")
	f.Add("gload-1-0-ffffffffffffffff.ring")
	f.Add("gload---.ring")
	f.Fuzz(func(t *testing.T, s string) {
		pid, start, ok := ParseName(s)
		if !ok {
			return
		}
		// A name that parses is canonical: rebuilding it gives it back.
		rand := s[strings.LastIndexByte(s, '-')+1 : len(s)-len(nameSuffix)]
		again := namePrefix + strconv.Itoa(pid) + "-" + strconv.FormatUint(start, 10) + "-" + rand + nameSuffix
		if pid <= 0 || (again != s && !leadingZeros(s)) {
			t.Fatalf("ParseName(%q) = %d, %d: rebuilt %q", s, pid, start, again)
		}
	})
}

// leadingZeros reports whether a number in a ring name has leading zeros
// (accepted, but not canonical).
func leadingZeros(s string) bool {
	parts := strings.Split(strings.TrimPrefix(s, namePrefix), "-")
	return (len(parts[0]) > 1 && parts[0][0] == '0') || (len(parts[1]) > 1 && parts[1][0] == '0')
}

func TestParseStat(t *testing.T) {
	tail := " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 987654 20 21\n"
	for _, tc := range []struct {
		name string
		in   string
		want uint64
		bad  bool
	}{
		{"plain", "42 (gload)" + tail, 987654, false},
		{"spaces and parens in the name", "42 (a) b (c) d)" + tail, 987654, false},
		{"no paren", "42 gload" + tail, 0, true},
		{"short", "42 (gload) S 1 2 3", 0, true},
		{"not a number", "42 (gload) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 x 20", 0, true},
		{"empty", "", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.in))
			if tc.bad != (err != nil) || got != tc.want {
				t.Fatalf("parseStat = %d, %v; want %d (error: %v)", got, err, tc.want, tc.bad)
			}
		})
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("42 (gload) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 987654 20 21\n"))
	f.Add([]byte("1 ()) R"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseStat(b)
		if err == nil && !bytes.Contains(b, []byte(strconv.FormatUint(v, 10))) {
			t.Fatalf("parseStat(%q) = %d, not in the input", b, v)
		}
	})
}

func TestProcessStart(t *testing.T) {
	self, err := ProcessStart(os.Getpid())
	if err != nil || self == 0 || self != selfStart() {
		t.Fatalf("ProcessStart(self) = %d, %v; selfStart %d", self, err, selfStart())
	}
	pid := deadPid(t)
	if _, err := ProcessStart(pid); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ProcessStart(dead %d): %v, want ErrNotExist", pid, err)
	}
	if _, err := ProcessStart(0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ProcessStart(0): %v", err)
	}
}

// deadPid returns the pid of a child process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run a child process: %v", err)
	}
	return cmd.Process.Pid
}

func TestRingRoundTrip(t *testing.T) {
	dir := t.TempDir()
	r, err := Create(dir, 3, 2*SlotAlign)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fi, err := os.Stat(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() != 3*2*SlotAlign || filepath.Dir(r.Path()) != dir {
		t.Fatalf("ring %s: mode %v, size %d", r.Path(), fi.Mode(), fi.Size())
	}
	pid, start, ok := ParseName(filepath.Base(r.Path()))
	if !ok || pid != os.Getpid() || start != selfStart() {
		t.Fatalf("ring name %s: owner %d/%d, %v", r.Path(), pid, start, ok)
	}
	for i := range 3 {
		s := r.Slot(i)
		if len(s) != 2*SlotAlign || cap(s) != len(s) {
			t.Fatalf("slot %d: %d bytes, cap %d", i, len(s), cap(s))
		}
		for j := range s {
			s[j] = byte(i*7 + j)
		}
	}
	if r.Slot(-1) != nil || r.Slot(3) != nil {
		t.Fatal("out-of-range slot is not nil")
	}
	if !r.Contains(uintptr(unsafePointer(r.Slot(2)))+100) || r.Contains(0) {
		t.Fatal("Contains")
	}

	m, err := Map(r.Path(), 3, 2*SlotAlign)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		s := m.Slot(i)
		for j := range s {
			if s[j] != byte(i*7+j) {
				t.Fatalf("mapping slot %d byte %d = %d", i, j, s[j])
			}
		}
	}
	r.Slot(1)[5] = 99 // the mapping is shared
	if m.Slot(1)[5] != 99 {
		t.Fatal("write not seen through the mapping")
	}
	if _, err := Map(r.Path(), 4, 2*SlotAlign); !errors.Is(err, ErrRing) {
		t.Fatalf("Map with the wrong size: %v", err)
	}
	if _, err := Map(filepath.Join(dir, "gload-1-0-0123456789abcdef.ring"), 1, SlotAlign); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Map of a missing file: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if m.Slot(0) != nil || m.Close() != nil {
		t.Fatal("mapping usable after Close")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ring file left after Close: %v", err)
	}
	if r.Slot(0) != nil || r.Close() != nil {
		t.Fatal("ring usable after Close, or second Close failed")
	}
}

func TestCreateErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		slots int
		bytes int64
	}{{0, SlotAlign}, {1, 0}, {1, SlotAlign + 1}, {1, MaxSlotBytes + SlotAlign}, {1 << 20, MaxSlotBytes}} {
		if _, err := Create(dir, tc.slots, tc.bytes); !errors.Is(err, ErrLayout) {
			t.Errorf("Create(%d, %d): %v, want ErrLayout", tc.slots, tc.bytes, err)
		}
	}
	if _, err := Create(filepath.Join(dir, "missing"), 1, SlotAlign); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Create in a missing dir: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Fatalf("failed creates left %d files", len(ents))
	}
}

func TestSweep(t *testing.T) {
	dir := t.TempDir()
	live, err := Create(dir, 1, SlotAlign)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	dead := deadPid(t)
	self, start := os.Getpid(), selfStart()
	files := map[string]bool{ // name: want removed
		fmt.Sprintf("gload-%d-%d-00000000000000aa.ring", dead, 5):       true,  // owner gone
		fmt.Sprintf("gload-%d-%d-00000000000000bb.ring", self, start+1): true,  // pid reused
		fmt.Sprintf("gload-%d-0-00000000000000cc.ring", self):           false, // start unknown, pid alive
		fmt.Sprintf("gload-%d-0-00000000000000dd.ring", dead):           true,
		fmt.Sprintf("gload-%d-%d-00000000000000ee.ring.tmp", dead, 5):   false, // not a ring name
		fmt.Sprintf("other-%d-%d-00000000000000ff.ring", dead, 5):       false,
		fmt.Sprintf("gload-%d-%d-0000000000000011.ring", self, start):   false, // our own
	}
	for name := range files {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("gload-%d-5-0000000000000022.ring", dead)), 0o700); err != nil {
		t.Fatal(err)
	}
	removed, err := Sweep(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, p := range removed {
		got[filepath.Base(p)] = true
	}
	for name, want := range files {
		_, statErr := os.Stat(filepath.Join(dir, name))
		if got[name] != want || (statErr == nil) == want {
			t.Errorf("%s: removed %v (stat %v), want %v", name, got[name], statErr, want)
		}
	}
	if len(got) != 3 {
		t.Errorf("removed %v", removed)
	}
	if _, err := os.Stat(live.Path()); err != nil {
		t.Fatalf("live ring removed: %v", err)
	}
	if r, err := Sweep(filepath.Join(dir, "missing")); r != nil || err != nil {
		t.Fatalf("Sweep of a missing dir: %v, %v", r, err)
	}
}

func BenchmarkCreateClose(b *testing.B) {
	dir := b.TempDir()
	for _, n := range []int64{SlotAlign, 1 << 20} {
		b.Run(strconv.FormatInt(n, 10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(8 * n)
			for b.Loop() {
				r, err := Create(dir, 8, n)
				if err != nil {
					b.Fatal(err)
				}
				if err := r.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSweep(b *testing.B) {
	dir := b.TempDir()
	for i := range 100 {
		name := fmt.Sprintf("gload-%d-%d-%016x.ring", os.Getpid(), selfStart(), i)
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetBytes(100)
	for b.Loop() {
		if _, err := Sweep(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDoorbell: the control region's size and word positions, Publish's
// fields with the sequence word, and Released reading the client's word.
func TestDoorbell(t *testing.T) {
	for _, tc := range []struct{ slots, want int }{{1, 4096}, {8, 4096}, {63, 4096}, {64, 8192}} {
		if got := ControlBytes(tc.slots); got != int64(tc.want) {
			t.Errorf("ControlBytes(%d) = %d, want %d", tc.slots, got, tc.want)
		}
	}
	r, err := CreateWithDoorbell(t.TempDir(), 3, SlotAlign)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if off, n := r.ControlOffset(); off != 3*SlotAlign || n != 4096 {
		t.Fatalf("ControlOffset = %d, %d", off, n)
	}
	d := r.Doorbell()
	d.Publish(2, Header{Seq: 5, Global: 7, RankStep: 9, Rows: 4, Length: 128, Pieces: 6, CuLen: 8, Trained: 300})
	ctl := r.mem[3*SlotAlign:]
	word := func(i int) uint64 { return binary.LittleEndian.Uint64(ctl[i*8:]) }
	base := (HeaderStart + 2*HeaderBytes) / 8
	want := []uint64{6, 7, 9, 4 | 128<<32, 6 | 8<<32, 300}
	for i, w := range want {
		if got := word(base + i); got != w {
			t.Errorf("header word %d = %d, want %d", i, got, w)
		}
	}
	binary.LittleEndian.PutUint64(ctl, 4)
	if got := d.Released(); got != 4 {
		t.Fatalf("Released = %d, want 4", got)
	}
	if plain, _ := Create(t.TempDir(), 1, SlotAlign); plain.Doorbell() != nil {
		t.Fatal("a ring without control region has a doorbell")
	} else {
		plain.Close()
	}
}
