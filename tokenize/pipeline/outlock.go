package pipeline

// The output directory's guard rails, checked before anything is written: --out may not lie inside (or be) an
// input, and one run at a time holds an exclusive lock on it for the whole run.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gload/gload/internal/readcap"
)

// lockName is the lock file a run holds in its output directory (flock, exclusive); it holds the holder's pid and
// is removed when the run ends.
const lockName = "gload.lock"

// realPath resolves symbolic links in p, for a path that may not exist yet: its longest existing prefix is
// resolved and the rest appended.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for cur := abs; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest), nil
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// within reports whether path is dir or lies below it (both resolved).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// checkOutOutsideInputs refuses an output directory that is, or lies inside, an input directory, or that holds an
// input file (named, or matched by a glob): --overwrite would otherwise delete inputs, and a later run would read
// its own output. It runs before the inputs are planned, as planning would already read the old output.
func checkOutOutsideInputs(out string, inputs []string) error {
	rout, err := realPath(out)
	if err != nil {
		return fmt.Errorf("tokenize: output %s: %w", out, err)
	}
	for _, in := range inputs {
		paths := []string{in}
		if _, err := os.Stat(in); err != nil {
			if m, gerr := filepath.Glob(in); gerr == nil {
				paths = m
			}
		}
		for _, p := range paths {
			fi, err := os.Stat(p)
			if err != nil {
				continue // planning reports it
			}
			rp, err := realPath(p)
			if err != nil {
				continue
			}
			if fi.IsDir() && within(rout, rp) {
				return fmt.Errorf("tokenize: output %s is inside the input directory %s; choose an --out outside the inputs", out, p)
			}
			if within(rp, rout) {
				return fmt.Errorf("tokenize: input %s lies inside the output directory %s; choose an --out outside the inputs", p, out)
			}
		}
	}
	return nil
}

// outLock is the held lock on an output directory.
type outLock struct {
	f    *os.File
	path string
}

// lockOut creates out (unless resume, which needs it to exist) and takes the run's exclusive lock in it. A
// directory locked by a live run is refused at once, naming the holder's pid.
func lockOut(out string, resume bool) (*outLock, error) {
	if _, err := os.Stat(out); errors.Is(err, os.ErrNotExist) {
		if resume {
			return nil, fmt.Errorf("tokenize: --resume: %s does not exist", out)
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, fmt.Errorf("tokenize: create %s: %w", out, err)
		}
	}
	path := filepath.Join(out, lockName)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("tokenize: lock %s: %w", path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("tokenize: output %s is in use by another gload tokenize run (%s); wait for it to end or choose another --out",
					out, holder(path))
			}
			return nil, fmt.Errorf("tokenize: lock %s: %w", path, err)
		}
		// The previous holder may have removed the file between our open and our flock: then we hold a lock on
		// an unlinked file, and must lock the one now at path instead.
		var held, now syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Stat(path, &now) == nil && held.Ino == now.Ino && held.Dev == now.Dev {
			if err := f.Truncate(0); err != nil {
				f.Close()
				return nil, fmt.Errorf("tokenize: lock %s: %w", path, err)
			}
			if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
				f.Close()
				return nil, fmt.Errorf("tokenize: lock %s: %w", path, err)
			}
			return &outLock{f: f, path: path}, nil
		}
		f.Close()
	}
}

// holder names the pid recorded in a held lock file (written just after the holder took it, so retried briefly).
func holder(path string) string {
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

// release removes the lock file and drops the lock.
func (l *outLock) release() {
	if l == nil || l.f == nil {
		return
	}
	os.Remove(l.path)
	l.f.Close()
	l.f = nil
}
