package shm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DefaultDir is where rings are created unless told otherwise.
const DefaultDir = "/dev/shm"

// MaxRingBytes bounds one ring (slots × slot bytes).
const MaxRingBytes = 1 << 40

// Ring is a server's ring file: slots × slotBytes bytes, mapped read-write.
// Its methods are safe for concurrent use, but writing a slot while Close
// runs is the caller's bug.
type Ring struct {
	path      string
	slots     int
	slotBytes int64

	mu      sync.Mutex
	mem     []byte // nil once closed
	control int64  // bytes of the control region after the slots (0: none)
}

// Create makes a new ring file in dir (mode 0600, a unique gload- name
// carrying this process's pid and start time), reserves its space (so that a
// full tmpfs fails here rather than faulting later) and maps it read-write.
func Create(dir string, slots int, slotBytes int64) (*Ring, error) {
	return create(dir, slots, slotBytes, 0)
}

// CreateWithDoorbell is [Create] with a control region after the slots
// ([ControlBytes] of them) for the [Doorbell] hand-off.
func CreateWithDoorbell(dir string, slots int, slotBytes int64) (*Ring, error) {
	return create(dir, slots, slotBytes, ControlBytes(slots))
}

func create(dir string, slots int, slotBytes, control int64) (*Ring, error) {
	if slots < 1 || slotBytes < 1 || slotBytes%SlotAlign != 0 || slotBytes > MaxSlotBytes || int64(slots) > MaxRingBytes/slotBytes {
		return nil, fmt.Errorf("%w: create ring in %s: %d slots of %d bytes", ErrLayout, dir, slots, slotBytes)
	}
	size := int64(slots)*slotBytes + control
	if size > int64(^uint(0)>>1) {
		return nil, fmt.Errorf("%w: create ring in %s: %d bytes do not fit the address space", ErrLayout, dir, size)
	}
	name, err := ringName(os.Getpid(), selfStart())
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create ring %s: %w", path, err)
	}
	fail := func(err error) (*Ring, error) {
		return nil, errors.Join(err, f.Close(), os.Remove(path))
	}
	// O_CREATE honours the umask, which can only take bits away; make the
	// mode exactly 0600 all the same.
	if err := f.Chmod(0o600); err != nil {
		return fail(fmt.Errorf("chmod ring %s: %w", path, err))
	}
	if err := reserve(int(f.Fd()), size); err != nil {
		return fail(fmt.Errorf("reserve %d bytes for ring %s: %w", size, path, err))
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail(fmt.Errorf("map ring %s: %w", path, err))
	}
	if err := f.Close(); err != nil {
		return nil, errors.Join(fmt.Errorf("close ring %s: %w", path, err), unix.Munmap(mem), os.Remove(path))
	}
	return &Ring{path: path, slots: slots, slotBytes: slotBytes, mem: mem, control: control}, nil
}

// reserve allocates size bytes for the file: fallocate where the file system
// supports it (tmpfs does), else a plain truncate.
func reserve(fd int, size int64) error {
	err := unix.Fallocate(fd, 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		err = unix.Ftruncate(fd, size)
	}
	return err
}

// ControlOffset returns where the control region starts in the file (the
// end of the slots) and its size; 0, 0 for a ring without one.
func (r *Ring) ControlOffset() (offset, size int64) {
	if r.control == 0 {
		return 0, 0
	}
	return int64(r.slots) * r.slotBytes, r.control
}

// Doorbell returns the ring's control region as a [Doorbell] (nil for a ring
// made by [Create], or once closed).
func (r *Ring) Doorbell() *Doorbell {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil || r.control == 0 {
		return nil
	}
	off := int64(r.slots) * r.slotBytes
	return &Doorbell{mem: r.mem[off : off+r.control : off+r.control], slots: r.slots}
}

// Path returns the ring's file path.
func (r *Ring) Path() string { return r.path }

// Slots returns the number of slots.
func (r *Ring) Slots() int { return r.slots }

// SlotBytes returns the size of one slot.
func (r *Ring) SlotBytes() int64 { return r.slotBytes }

// Slot returns slot i's memory (nil if i is out of range or the ring is
// closed).
func (r *Ring) Slot(i int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slot(r.mem, i, r.slots, r.slotBytes)
}

func slot(mem []byte, i, slots int, slotBytes int64) []byte {
	if mem == nil || i < 0 || i >= slots {
		return nil
	}
	lo := int64(i) * slotBytes
	return mem[lo : lo+slotBytes : lo+slotBytes]
}

// Contains reports whether addr lies inside the ring's mapping (to tell a
// memory fault in the ring from one in a mapped dataset shard).
func (r *Ring) Contains(addr uintptr) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return contains(r.mem, addr)
}

func contains(mem []byte, addr uintptr) bool {
	if len(mem) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	return addr >= lo && addr-lo < uintptr(len(mem))
}

// Close unmaps the ring and removes its file. It is idempotent; a file
// already gone is not an error.
func (r *Ring) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil {
		return nil
	}
	var errs []error
	if err := unix.Munmap(r.mem); err != nil {
		errs = append(errs, fmt.Errorf("unmap ring %s: %w", r.path, err))
	}
	r.mem = nil
	if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove ring %s: %w", r.path, err))
	}
	return errors.Join(errs...)
}

// Mapping is a client's read-only view of a server's ring.
type Mapping struct {
	path      string
	slots     int
	slotBytes int64

	mu    sync.Mutex
	mem   []byte
	extra []byte // MapDoorbell: the read-write page of the released word
}

// Map maps the ring at path read-only, checking that it is a regular file
// of exactly slots × slotBytes bytes.
//
// The path must be a ring's (CheckRingPath) and the file, opened without
// following a symbolic link, a regular file with one link that belongs to the
// calling user or to the uid given with [Owner].
func Map(path string, slots int, slotBytes int64, opts ...MapOption) (*Mapping, error) {
	m, _, err := mapRing(path, slots, slotBytes, 0, opts)
	return m, err
}

// MapDoorbell maps a ring made by [CreateWithDoorbell]: the slots read-only
// as [Map] does, and the control region's first page read-write (the client's
// released word). The file must be exactly slots × slotBytes + ControlBytes.
// The file is checked as Map checks it.
func MapDoorbell(path string, slots int, slotBytes int64, opts ...MapOption) (*Mapping, *ClientDoorbell, error) {
	if slotBytes%SlotAlign != 0 { // the control region must start on a page
		return nil, nil, fmt.Errorf("%w: map ring %s: %d slots of %d bytes", ErrRing, path, slots, slotBytes)
	}
	return mapRing(path, slots, slotBytes, ControlBytes(slots), opts)
}

// mapRing is Map with a control region of control bytes after the slots
// (0: none), whose first page it maps read-write as well.
func mapRing(path string, slots int, slotBytes, control int64, opts []MapOption) (*Mapping, *ClientDoorbell, error) {
	o := mapOptions{owner: os.Geteuid()}
	for _, f := range opts {
		f(&o)
	}
	if slots < 1 || slotBytes < 1 || slotBytes > MaxSlotBytes || int64(slots) > MaxRingBytes/slotBytes {
		return nil, nil, fmt.Errorf("%w: map ring %s: %d slots of %d bytes", ErrRing, path, slots, slotBytes)
	}
	off := int64(slots) * slotBytes
	size := off + control
	if size > int64(^uint(0)>>1) {
		return nil, nil, fmt.Errorf("%w: map ring %s: %d bytes do not fit the address space", ErrRing, path, size)
	}
	flags, want := os.O_RDONLY, fmt.Sprintf("%d×%d bytes", slots, slotBytes)
	if control > 0 {
		flags, want = os.O_RDWR, fmt.Sprintf("%d×%d + %d bytes", slots, slotBytes, control)
	}
	f, err := openRing(path, flags, o.owner, size, want)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("map ring %s: %w", path, err)
	}
	m := &Mapping{path: path, slots: slots, slotBytes: slotBytes, mem: mem}
	if control == 0 {
		return m, nil, nil
	}
	word, err := unix.Mmap(int(f.Fd()), off, SlotAlign, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("map ring %s control: %w", path, err), unix.Munmap(mem))
	}
	m.extra = word
	return m, &ClientDoorbell{headers: mem[off:size:size], released: word, slots: slots}, nil
}

// Path returns the ring file's path.
func (m *Mapping) Path() string { return m.path }

// Slot returns slot i's memory, read-only (nil if i is out of range or the
// mapping is closed). Writing to it faults.
func (m *Mapping) Slot(i int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slot(m.mem, i, m.slots, m.slotBytes)
}

// Close unmaps the ring; idempotent.
func (m *Mapping) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mem == nil {
		return nil
	}
	err := unix.Munmap(m.mem)
	m.mem = nil
	if m.extra != nil {
		err = errors.Join(err, unix.Munmap(m.extra))
		m.extra = nil
	}
	if err != nil {
		return fmt.Errorf("unmap ring %s: %w", m.path, err)
	}
	return nil
}

// Sweep removes from dir the ring files of processes that are gone: files
// named like rings, owned by the calling user, whose owner pid no longer
// exists or now belongs to a process with another start time (pid reuse).
// It returns the paths it removed. Files of live owners, of other users and
// with other names are left alone. A missing dir is not an error.
func Sweep(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sweep rings in %s: %w", dir, err)
	}
	uid := os.Geteuid()
	var removed []string
	var errs []error
	for _, e := range ents {
		pid, start, ok := ParseName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(path)
		if err != nil {
			continue // gone meanwhile
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
			continue
		}
		if alive(pid, start) {
			continue
		}
		if err := os.Remove(path); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove stale ring %s: %w", path, err))
			}
			continue
		}
		removed = append(removed, path)
	}
	return removed, errors.Join(errs...)
}
