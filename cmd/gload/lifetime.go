package main

// This file holds the lifetime of a server started for one job (by a Python
// Loader given a dataset path): it exits an idle time after its last client
// leaves, at once when the process that started it has died and no client is
// left, and it removes its start lock on the way out.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// lifetimeOptions are serve's --idle-exit, --owner-pid and --lock-file.
type lifetimeOptions struct {
	idleExit time.Duration
	ownerPID int
	lockFile string
}

func (o lifetimeOptions) enabled() bool { return o.idleExit > 0 || o.ownerPID > 0 }

func (o lifetimeOptions) check() error {
	if o.idleExit < 0 {
		return fmt.Errorf("--idle-exit %s: want a duration >= 0", o.idleExit)
	}
	if o.ownerPID < 0 || o.ownerPID == os.Getpid() {
		return fmt.Errorf("--owner-pid %d: want the pid of another process", o.ownerPID)
	}
	return nil
}

// lifetime watches one server: run calls stop when the server should exit,
// holding the lock file's lock (if any) from that decision until release.
type lifetime struct {
	o     lifetimeOptions
	log   *slog.Logger
	idle  func() (int, time.Time)
	owner *ownerWatch
	lock  *os.File // held from the decision to exit until release
	tick  time.Duration
}

func newLifetime(o lifetimeOptions, log *slog.Logger, idle func() (int, time.Time)) *lifetime {
	l := &lifetime{o: o, log: log, idle: idle, tick: 200 * time.Millisecond}
	if o.ownerPID > 0 {
		l.owner = watchOwner(o.ownerPID)
	}
	return l
}

// run polls until ctx ends or the server should exit; then it calls stop.
func (l *lifetime) run(ctx context.Context, stop func()) {
	t := time.NewTicker(l.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		why := l.due()
		if why == "" {
			continue
		}
		// A client holding the start lock is attaching (or starting a server):
		// wait for it rather than exit under it.
		if !l.takeLock() {
			continue
		}
		if why = l.due(); why == "" {
			l.release()
			continue
		}
		l.log.Info("exiting", "why", why)
		stop()
		return
	}
}

// due says why the server should exit now ("" while it should not).
func (l *lifetime) due() string {
	conns, since := l.idle()
	if conns > 0 {
		return ""
	}
	if l.owner != nil && l.owner.dead() {
		return fmt.Sprintf("the process that started it (pid %d) has exited and no client is connected", l.o.ownerPID)
	}
	if l.o.idleExit > 0 && time.Since(since) >= l.o.idleExit {
		return fmt.Sprintf("no client for %s (--idle-exit)", l.o.idleExit)
	}
	return ""
}

// takeLock takes the lock file's lock without waiting; true when held (or
// when there is no lock file).
func (l *lifetime) takeLock() bool {
	if l.o.lockFile == "" || l.lock != nil {
		return true
	}
	f, err := os.OpenFile(l.o.lockFile, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		l.log.Warn("lock file", "path", l.o.lockFile, "err", err)
		return true
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	l.lock = f
	return true
}

// release removes the lock file (if it is still the one locked) and unlocks.
// The file is removed while locked: a client that opened it meanwhile sees,
// once it gets the lock, that the path no longer names its file and retries.
func (l *lifetime) release() {
	if l.lock == nil {
		return
	}
	if fi, err := l.lock.Stat(); err == nil {
		if pi, err := os.Stat(l.o.lockFile); err == nil && os.SameFile(fi, pi) {
			os.Remove(l.o.lockFile)
		}
	}
	l.lock.Close()
	l.lock = nil
}

// finish runs after the server stopped: the lock file goes too.
func (l *lifetime) finish() {
	if l.o.lockFile != "" && l.lock == nil {
		// Stopped by a signal or an error: take the lock to remove the file,
		// unless a client holds it (it then starts the next server).
		if !l.takeLock() {
			return
		}
	}
	l.release()
	if l.owner != nil {
		l.owner.close()
	}
}

// ownerWatch tells whether a process has exited: through a pidfd (Linux
// 5.3+: exact, and a reused pid cannot fool it), else kill(pid, 0).
type ownerWatch struct {
	pid  int
	fd   int
	gone bool
}

func watchOwner(pid int) *ownerWatch {
	w := &ownerWatch{pid: pid, fd: -1}
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		w.fd = fd
	case errors.Is(err, unix.ESRCH):
		w.gone = true
	}
	return w
}

func (w *ownerWatch) dead() bool {
	if w.gone {
		return true
	}
	if w.fd >= 0 {
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		w.gone = err == nil && n > 0
		return w.gone
	}
	w.gone = errors.Is(unix.Kill(w.pid, 0), unix.ESRCH)
	return w.gone
}

func (w *ownerWatch) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}
