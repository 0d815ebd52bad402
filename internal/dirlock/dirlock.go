//go:build unix

// Package dirlock is the exclusive lock a gload command holds on a dataset directory while it writes it: an
// flock(2) on DIR/gload.lock, the file holding the holder's pid and removed when the holder ends. It is the same
// protocol gload tokenize uses (tokenize/pipeline), so a tokenize run and a sync into one directory exclude each
// other too.
//
// # Caveats
//
// flock is advisory and per open file: it protects against other gload processes, not against other programs
// writing the directory. On network file systems without flock support the lock fails with the system's error.
package dirlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gload/gload/internal/readcap"
	"github.com/gload/gload/internal/safename"
)

// Name is the lock file in a locked directory.
const Name = "gload.lock"

// Lock is a held lock.
type Lock struct {
	f    *os.File
	path string
}

// Options control Acquire.
type Options struct {
	// Wait: wait for a held lock to be released (until ctx ends) instead of failing at once.
	Wait bool
	// Waiting, if set, is called once when the lock is held by another process, with the holder ("pid 123").
	Waiting func(holder string)
	// Poll is how often a waiter tries again; 0: 100 ms.
	Poll time.Duration
}

// ErrBusy means the directory is locked by another process (and Options.Wait was not set).
var ErrBusy = errors.New("dirlock: directory in use by another gload process")

// Acquire takes the exclusive lock on dir, which must exist.
func Acquire(ctx context.Context, dir string, opts Options) (*Lock, error) {
	path := filepath.Join(dir, Name)
	poll := opts.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	told := false
	for {
		f, err := safename.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("lock %s: %w", path, err)
			}
			if !opts.Wait {
				return nil, fmt.Errorf("%w: %s (%s)", ErrBusy, dir, Holder(path))
			}
			if !told && opts.Waiting != nil {
				opts.Waiting(Holder(path))
				told = true
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
			case <-time.After(poll):
			}
			continue
		}
		// The previous holder may have removed the file between our open and our flock: then we hold a lock on an
		// unlinked file, and must lock the one now at path instead.
		var held, now syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Lstat(path, &now) == nil && held.Ino == now.Ino && held.Dev == now.Dev {
			if err := f.Truncate(0); err != nil {
				f.Close()
				return nil, fmt.Errorf("lock %s: %w", path, err)
			}
			if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
				f.Close()
				return nil, fmt.Errorf("lock %s: %w", path, err)
			}
			return &Lock{f: f, path: path}, nil
		}
		f.Close()
	}
}

// Holder names the pid recorded in a held lock file (written just after the holder took it, so retried briefly).
func Holder(path string) string {
	for range 50 {
		if b, err := readcap.File(path, readcap.Limit{Bytes: 4 << 10, Name: "a lock file"}); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return fmt.Sprintf("pid %d", pid)
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return "pid unknown"
}

// Release removes the lock file and drops the lock. A nil or released Lock does nothing.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	os.Remove(l.path)
	l.f.Close()
	l.f = nil
}
