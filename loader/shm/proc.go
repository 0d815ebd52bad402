package shm

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
)

// ProcessStart returns the start time of process pid, in clock ticks after
// boot (field 22 of /proc/PID/stat). Together with the pid it names a
// process: a reused pid has another start time. An error wrapping
// fs.ErrNotExist means there is no such process.
func ProcessStart(pid int) (uint64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("process %d: %w", pid, fs.ErrNotExist)
	}
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	v, err := parseStat(b)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return v, nil
}

// errStat means a /proc/PID/stat line could not be parsed.
var errStat = errors.New("malformed stat line")

// parseStat returns field 22 (starttime) of a /proc/PID/stat line. The
// command name (field 2) is in parentheses and may itself contain spaces and
// parentheses, so fields are counted after the last ')'.
func parseStat(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errStat
	}
	// Fields 3, 4, … follow the command name.
	fields := strings.Fields(string(b[i+1:]))
	const starttime = 22 - 3
	if len(fields) <= starttime {
		return 0, fmt.Errorf("%w: %d fields after the command name", errStat, len(fields))
	}
	v, err := strconv.ParseUint(fields[starttime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: starttime %q", errStat, fields[starttime])
	}
	return v, nil
}

// selfStart is this process's start time (0 when /proc cannot tell).
var selfStart = sync.OnceValue(func() uint64 {
	v, err := ProcessStart(os.Getpid())
	if err != nil {
		return 0
	}
	return v
})

// alive reports whether the process named by (pid, start) still runs. A
// start of 0 matches any process with that pid. A process whose stat cannot
// be read for another reason than its absence counts as alive.
func alive(pid int, start uint64) bool {
	got, err := ProcessStart(pid)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	return start == 0 || got == start
}
