package loader_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/loader/shm"
	"github.com/gload/gload/proto/gloadpb"
)

// ringFiles lists the files of dir.
func ringFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestShmRing checks the ring of a shared-memory stream: where and how it is
// made, that slots are handed out and reused under the credit bound, and that
// the file is gone when the stream ends, whichever way it ends.
func TestShmRing(t *testing.T) {
	dir := t.TempDir()
	lengths := genLengths(300, 1, 200, 21)
	writeDataset(t, dir, lengths, 300, 100)
	ringDir := t.TempDir()
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, ShmDir: ringDir}, "unix")
	c := dial(t, ts.addr)
	base := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 8, PadMultiple: 32}, Prefetch: 3,
		Transport: gloadpb.Transport_TRANSPORT_SHM, ClientId: "shm"}

	t.Run("layout and slots", func(t *testing.T) {
		// The message hand-off: a slot released out of order is reused at once (over the doorbell, slots come
		// back in stream order: TestShmDoorbellGoClient).
		s, err := c.Stream(t.Context(), cloneOpen(base), client.AckOnNext(false), client.Reports(false), client.Doorbell(false))
		if err != nil {
			t.Fatal(err)
		}
		o := s.Opened()
		if filepath.Dir(o.ShmPath) != ringDir || o.Slots != 3 || o.Prefetch != 3 || o.SlotBytes%shm.SlotAlign != 0 {
			t.Fatalf("opened: path %s, %d slots of %d bytes, prefetch %d", o.ShmPath, o.Slots, o.SlotBytes, o.Prefetch)
		}
		if _, _, ok := shm.ParseName(filepath.Base(o.ShmPath)); !ok {
			t.Fatalf("ring name %s", o.ShmPath)
		}
		fi, err := os.Stat(o.ShmPath)
		if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != int64(o.Slots)*int64(o.SlotBytes) {
			t.Fatalf("ring file: %v, %v", fi, err)
		}
		maxCells := uint64(0)
		for _, sh := range o.Shapes {
			maxCells = max(maxCells, uint64(sh.Rows)*uint64(sh.Length))
		}
		l := o.Layout
		for _, off := range []uint64{l.InputIds, l.Lengths, l.Index, l.PositionIds, l.CuSeqlens} {
			if off%shm.BufferAlign != 0 || off > o.SlotBytes {
				t.Fatalf("layout %v: offset %d", l, off)
			}
		}
		if l.InputIds != 0 || l.Lengths < 4*maxCells {
			t.Fatalf("layout %v overlaps input_ids of %d cells", l, maxCells)
		}
		var held []*client.Batch
		slots := map[int32]bool{}
		for range 3 {
			b, err := s.Next(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, b)
			slots[b.Slot] = true
			if err := checkBatch(copyBatch(b), lengths, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		if len(slots) != 3 {
			t.Fatalf("3 outstanding batches share slots: %v", slots)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		if _, err := s.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a fourth batch without an ack: %v", err)
		}
		cancel()
		freed := held[1].Slot
		held[1].Release()
		b, err := s.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if b.Slot != freed {
			t.Fatalf("batch after releasing slot %d came in slot %d", freed, b.Slot)
		}
		if err := checkBatch(copyBatch(b), lengths, 0, 0); err != nil {
			t.Fatal(err)
		}
		// Ending the stream early removes the ring.
		s.Close()
		waitFor(t, "ring removed after close", func() (bool, string) {
			f := ringFiles(t, ringDir)
			return len(f) == 0, fmt.Sprint(f)
		})
	})

	t.Run("same batches as grpc", func(t *testing.T) {
		viaShm, st1, _, err := pullAll(t.Context(), c, cloneOpen(base), -1)
		if err != nil {
			t.Fatal(err)
		}
		g := cloneOpen(base)
		g.Transport = gloadpb.Transport_TRANSPORT_GRPC
		viaGRPC, st2, _, err := pullAll(t.Context(), c, g, -1)
		if err != nil {
			t.Fatal(err)
		}
		if len(viaShm) != len(viaGRPC) || len(viaShm) == 0 || st1.Consumed != st2.Consumed {
			t.Fatalf("shm %d batches (state %v), grpc %d (state %v)", len(viaShm), st1, len(viaGRPC), st2)
		}
		for i := range viaShm {
			a, b := viaShm[i], viaGRPC[i]
			if fmt.Sprint(a.ids, a.lengths, a.index, a.global) != fmt.Sprint(b.ids, b.lengths, b.index, b.global) {
				t.Fatalf("batch %d differs between transports", i)
			}
		}
		waitFor(t, "ring removed at the end", func() (bool, string) {
			f := ringFiles(t, ringDir)
			return len(f) == 0, fmt.Sprint(f)
		})
	})

	t.Run("client gone", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		s, err := c.Stream(ctx, cloneOpen(base), client.AckOnNext(false))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Next(ctx); err != nil {
			t.Fatal(err)
		}
		if len(ringFiles(t, ringDir)) != 1 {
			t.Fatalf("rings while one stream is open: %v", ringFiles(t, ringDir))
		}
		cancel() // never acks, never closes
		waitFor(t, "ring removed after the client went away", func() (bool, string) {
			f := ringFiles(t, ringDir)
			return len(f) == 0 && ts.srv.Streams() == 0, fmt.Sprint(f)
		})
		s.Close()
	})
}

// TestShmStaleRings: a server removes, at start, the rings of processes that
// are gone and keeps those of live ones.
func TestShmStaleRings(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(50, 1, 20, 22), 50, 50)
	ringDir := t.TempDir()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run a child process: %v", err)
	}
	dead := cmd.Process.Pid
	stale := fmt.Sprintf("gload-%d-1-00000000000000aa.ring", dead)
	live, err := shm.Create(ringDir, 1, shm.SlotAlign)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := os.WriteFile(filepath.Join(ringDir, stale), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := loader.NewServer(loader.Config{Datasets: map[string]string{"d": dir}, ShmDir: ringDir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if f := ringFiles(t, ringDir); len(f) != 1 || f[0] != filepath.Base(live.Path()) {
		t.Fatalf("after start: %v; want only the live ring", f)
	}
}

// TestShmErrors: a ring that cannot be made, and acks that name the wrong slot.
func TestShmErrors(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(100, 1, 50, 23), 100, 50)
	missing := filepath.Join(t.TempDir(), "missing")
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, ShmDir: missing}, "unix")
	c := dial(t, ts.addr)
	open := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 2}, Transport: gloadpb.Transport_TRANSPORT_SHM}
	_, err := c.Stream(t.Context(), open)
	checkStatus(t, "Batches", err, codes.FailedPrecondition, []string{"transport: shm", missing, "grpc"})

	ringDir := t.TempDir()
	ts2 := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, ShmDir: ringDir}, "unix")
	cc, err := grpc.NewClient(ts2.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := gloadpb.NewLoaderClient(cc).Batches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	open.Prefetch = 2
	if err := st.Send(&gloadpb.ClientMessage{Msg: &gloadpb.ClientMessage_Open{Open: open}}); err != nil {
		t.Fatal(err)
	}
	slotOf := map[uint64]int32{}
	for len(slotOf) < 2 {
		m, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if b := m.GetBatch(); b != nil {
			if len(b.InputIds) != 0 || b.Slot < 0 {
				t.Fatalf("shm batch carries %d bytes in slot %d", len(b.InputIds), b.Slot)
			}
			slotOf[b.Seq] = b.Slot
		}
	}
	wrong := 1 - slotOf[0]
	if err := st.Send(&gloadpb.ClientMessage{Msg: &gloadpb.ClientMessage_Ack{Ack: &gloadpb.Ack{Seq: 0, Slot: wrong}}}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err = st.Recv(); err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		t.Fatal("stream ended cleanly after an ack naming the wrong slot")
	}
	checkStatus(t, "Batches", err, codes.InvalidArgument, []string{"ack: batch 0 is in slot", fmt.Sprint(wrong)})
	waitFor(t, "ring removed after the error", func() (bool, string) {
		f := ringFiles(t, ringDir)
		return len(f) == 0, fmt.Sprint(f)
	})
}
