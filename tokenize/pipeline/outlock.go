package pipeline

// The output directory's guard rails, checked before anything is written: --out may not lie inside (or be) an
// input, and one run at a time holds an exclusive lock on it for the whole run.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gload/gload/internal/dirlock"
)

// lockName is the lock file a run holds in its output directory (internal/dirlock's protocol: flock, exclusive,
// holding the holder's pid, removed when the run ends; gload sync takes the same lock).
const lockName = dirlock.Name

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

// lockOut creates out (unless resume, which needs it to exist) and takes the run's exclusive lock in it. A
// directory locked by a live run is refused at once, naming the holder's pid.
func lockOut(out string, resume bool) (*dirlock.Lock, error) {
	if _, err := os.Stat(out); errors.Is(err, os.ErrNotExist) {
		if resume {
			return nil, fmt.Errorf("tokenize: --resume: %s does not exist", out)
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, fmt.Errorf("tokenize: create %s: %w", out, err)
		}
	}
	l, err := dirlock.Acquire(context.Background(), out, dirlock.Options{})
	if errors.Is(err, dirlock.ErrBusy) {
		return nil, fmt.Errorf("tokenize: output %s is in use by another gload tokenize run (%s); wait for it to end or choose another --out",
			out, dirlock.Holder(filepath.Join(out, lockName)))
	}
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	return l, nil
}
