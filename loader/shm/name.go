package shm

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Ring file names are gload-PID-START-RANDOM.ring: the owner's pid, its start
// time in clock ticks after boot (0: unknown) and 16 random hex digits.
const (
	namePrefix = "gload-"
	nameSuffix = ".ring"
	randDigits = 16
)

// ringName returns a new unique ring file name for process (pid, start).
func ringName(pid int, start uint64) (string, error) {
	var r [randDigits / 2]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("ring name: random bytes: %w", err)
	}
	return namePrefix + strconv.Itoa(pid) + "-" + strconv.FormatUint(start, 10) + "-" + hex.EncodeToString(r[:]) + nameSuffix, nil
}

// ParseName returns the owner of the ring named name (a base name); ok is
// false for names that are not ring names.
func ParseName(name string) (pid int, start uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return 0, 0, false
	}
	if rest, ok = strings.CutSuffix(rest, nameSuffix); !ok {
		return 0, 0, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 || len(parts[2]) != randDigits || !isDigits(parts[0]) || !isDigits(parts[1]) {
		return 0, 0, false
	}
	if _, err := hex.DecodeString(parts[2]); err != nil {
		return 0, 0, false
	}
	p, err := strconv.ParseInt(parts[0], 10, 32)
	if err != nil || p <= 0 {
		return 0, 0, false
	}
	s, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return int(p), s, true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
