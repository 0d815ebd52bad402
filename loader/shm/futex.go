package shm

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Waking the other side of a doorbell ring instead of polling it. A side
// about to sleep sets its waiting word, reads the word it waits on once
// more, then sleeps in futex(2) on that word's low half with a timeout; the
// other side, after storing the word, wakes it if the waiting word is set.
// Sleeps of Go timers and of Python's time.sleep under a millisecond last
// about a millisecond (the runtime's netpoller rounds them up), which capped
// the hand-off at one slot per millisecond when a ring was full; a futex
// wakes in microseconds. The futexes are shared (not FUTEX_PRIVATE): the
// words live in a MAP_SHARED file mapping of two processes.
//
// The timeout bounds a wake-up that was missed (a side that does not know the
// waiting words, or a store of the woken word still in its writer's store
// buffer when the waiter's futex call read it): it costs that long, never a
// hang.
const (
	futexWait = 0 // FUTEX_WAIT
	futexWake = 1 // FUTEX_WAKE
)

// low32 is the low half of the little-endian uint64 at p: what a futex on it
// compares and sleeps on.
func low32(p *uint64) *uint32 { return (*uint32)(unsafe.Pointer(p)) }

// futexSleep sleeps while *addr == val, at most timeout (a wake-up, a change
// of *addr before the call, a signal and the timeout all return).
func futexSleep(addr *uint32, val uint32, timeout time.Duration) {
	ts := unix.NsecToTimespec(int64(timeout))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWakeAll wakes every sleeper on addr.
func futexWakeAll(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, uintptr(1<<31-1), 0, 0, 0)
}

// wait sleeps on the uint64 at p while it equals seen, at most timeout,
// with the waiting flag set to flag (non-zero) for the duration. It returns
// the word's value.
func wait(p *uint64, waiting *uint32, flag uint32, seen uint64, timeout time.Duration) uint64 {
	atomic.StoreUint32(waiting, flag) // a full barrier on the platforms gload runs on: the load below sees a store made before the peer read the flag
	got := atomic.LoadUint64(p)
	if got == seen {
		futexSleep(low32(p), uint32(seen), timeout)
		got = atomic.LoadUint64(p)
	}
	atomic.StoreUint32(waiting, 0)
	return got
}

// wakeFlag is the waiting flag that asks to be woken once the uint64 word
// reaches at least n: its low half, never 0 (0 means nobody waits; a low half
// of 0 becomes 2^32-1, a wake-up one count early).
func wakeFlag(n uint64) uint32 {
	if uint32(n) == 0 {
		return ^uint32(0)
	}
	return uint32(n)
}

// reached says whether value v has reached the waiting flag f (compared as
// the low halves of counters that only grow, modulo 2^32).
func reached(v uint64, f uint32) bool { return int32(uint32(v)-f) >= 0 }
