package shm

import (
	"sync/atomic"
	"testing"
	"time"
)

// The two sides of a doorbell ring, each through its own mapping of the file
// (as in two processes: the futexes are keyed by the file, not the address).
func doorbellPair(t *testing.T, slots int) (*Doorbell, *ClientDoorbell) {
	t.Helper()
	r, err := CreateWithDoorbell(t.TempDir(), slots, SlotAlign)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	m, cd, err := MapDoorbell(r.Path(), slots, SlotAlign)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return r.Doorbell(), cd
}

// A sleeper is woken by the other side's store long before its timeout, in
// both directions; with nothing stored it returns at its timeout.
func TestDoorbellWake(t *testing.T) {
	const long = 20 * time.Second
	tests := []struct {
		name  string
		sleep func(d *Doorbell, c *ClientDoorbell) // blocks until woken (or long)
		store func(d *Doorbell, c *ClientDoorbell)
		check func(d *Doorbell, c *ClientDoorbell) bool
	}{
		{"server waits for a release",
			func(d *Doorbell, c *ClientDoorbell) { d.WaitReleased(0, 1, long) },
			func(d *Doorbell, c *ClientDoorbell) { c.Release(1) },
			func(d *Doorbell, c *ClientDoorbell) bool { return d.Released() == 1 }},
		{"server waits for half its ring",
			func(d *Doorbell, c *ClientDoorbell) { d.WaitReleased(0, 3, long) },
			func(d *Doorbell, c *ClientDoorbell) { c.Release(3) },
			func(d *Doorbell, c *ClientDoorbell) bool { return d.Released() == 3 }},
		{"client waits for a batch",
			func(d *Doorbell, c *ClientDoorbell) { c.WaitReady(1, 1, long) },
			func(d *Doorbell, c *ClientDoorbell) { d.Publish(1, Header{Seq: 1, Rows: 2, Length: 3}) },
			func(d *Doorbell, c *ClientDoorbell) bool { _, ok := c.Ready(1, 1); return ok }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, c := doorbellPair(t, 3)
			done := make(chan time.Duration, 1)
			go func() {
				t0 := time.Now()
				tc.sleep(d, c)
				done <- time.Since(t0)
			}()
			// Store only once the sleeper is (very likely) in its futex: the flag is up.
			for deadline := time.Now().Add(5 * time.Second); !sleeping(d) && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			if !sleeping(d) {
				t.Fatal("the sleeper never raised its waiting flag")
			}
			tc.store(d, c)
			select {
			case took := <-done:
				if !tc.check(d, c) {
					t.Fatal("woken, but the store is not visible")
				}
				t.Logf("woken after %v", took)
			case <-time.After(long / 2):
				t.Fatal("not woken by the store (still asleep after 10 s of a 20 s timeout)")
			}
		})
	}
	t.Run("timeout", func(t *testing.T) {
		d, c := doorbellPair(t, 2)
		if got := d.WaitReleased(0, 1, time.Millisecond); got != 0 {
			t.Fatalf("WaitReleased = %d with nothing released", got)
		}
		c.WaitReady(0, 0, time.Millisecond) // returns: nothing published
		if sleeping(d) {
			t.Fatal("a waiting flag stayed up after the wait")
		}
		c.Release(1)
		if got := d.WaitReleased(0, 1, long); got != 1 {
			t.Fatalf("WaitReleased after a release = %d, want 1 at once", got)
		}
	})
}

func sleeping(d *Doorbell) bool {
	return atomic.LoadUint32(serverWaiting(d.mem)) != 0 || atomic.LoadUint32(clientWaiting(d.mem)) != 0
}

// The server's flag asks for a wake-up once the released count reaches it,
// across the wrap of its 32-bit low half.
func TestWakeFlag(t *testing.T) {
	tests := []struct {
		released, wakeAt uint64
		want             bool
	}{
		{0, 1, false}, {1, 1, true}, {2, 1, true}, {2, 3, false}, {3, 3, true},
		{1<<32 - 2, 1 << 32, false}, {1 << 32, 1 << 32, true}, {1<<32 + 5, 1<<32 - 2, true},
		{1<<32 - 1, 1 << 32, true}, // a low half of 0 would mean "nobody waits": one count early instead
	}
	for _, tc := range tests {
		f := wakeFlag(tc.wakeAt)
		if f == 0 {
			t.Fatalf("wakeFlag(%d) = 0", tc.wakeAt)
		}
		if got := reached(tc.released, f); got != tc.want {
			t.Errorf("reached(%d, wakeFlag(%d)) = %v, want %v", tc.released, tc.wakeAt, got, tc.want)
		}
	}
}
