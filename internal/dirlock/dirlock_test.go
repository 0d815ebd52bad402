//go:build unix

package dirlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Many holders in turn: never two at once, every one gets the lock, a non-waiting one is refused naming the pid.
func TestAcquireExclusive(t *testing.T) {
	dir := t.TempDir()
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := Acquire(context.Background(), dir, Options{Wait: true, Poll: time.Millisecond})
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for {
				m := maxInside.Load()
				if n <= m || maxInside.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
			inside.Add(-1)
			l.Release()
		}()
	}
	wg.Wait()
	if maxInside.Load() != 1 {
		t.Fatalf("%d holders at once", maxInside.Load())
	}
	l, err := Acquire(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err := Acquire(context.Background(), dir, Options{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Acquire: %v, want ErrBusy", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		_, err := Acquire(ctx, dir, Options{Wait: true, Waiting: func(h string) { waiting <- h }})
		done <- err
	}()
	if h := <-waiting; h == "" {
		t.Error("Waiting told no holder")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
}
