// Package readcap reads whole files that configure gload (tokenizer.json,
// tokenizer_config.json, chat templates, mixture files) with a size cap, so
// that a device (/dev/zero), a pipe or a huge file cannot make gload read
// or allocate without end.
//
// A regular file larger than the cap is refused from its size, before it is
// read; anything else that can be read (a pipe, /dev/stdin, a character
// device) is read up to the cap and refused when more follows. A file that
// grows while it is read is cut at the cap the same way. Errors name the
// file, the cap and the cap's name, and wrap [ErrTooLarge] (or the
// os/gzip error).
package readcap

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrTooLarge marks a file over its cap.
var ErrTooLarge = errors.New("file too large")

// Limit is a size cap and the name the error gives it (a constant or a flag).
type Limit struct {
	Bytes int64
	Name  string
}

func (l Limit) err(path, what string) error {
	return fmt.Errorf("read %s: %w: %s more than %d bytes (%s), the limit of %s", path, ErrTooLarge, what, l.Bytes, humanBytes(l.Bytes), l.Name)
}

// File returns the contents of path, at most l.Bytes of them.
func File(path string, l Limit) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case st.IsDir():
		return nil, fmt.Errorf("read %s: is a directory", path)
	case st.Mode().IsRegular() && st.Size() > l.Bytes:
		return nil, l.err(path, fmt.Sprintf("it holds %d bytes,", st.Size()))
	}
	size := int64(512)
	if st.Mode().IsRegular() {
		size = st.Size() + 1
	}
	buf := bytes.NewBuffer(make([]byte, 0, min(size, l.Bytes+1)))
	n, err := buf.ReadFrom(io.LimitReader(fh, l.Bytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if n > l.Bytes {
		return nil, l.err(path, "it holds")
	}
	return buf.Bytes(), nil
}

// IsGzip reports whether data starts with gzip's magic bytes.
func IsGzip(data []byte) bool { return len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b }

// Gunzip decompresses data (read from path) to at most l.Bytes.
func Gunzip(data []byte, path string, l Limit) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(zr, l.Bytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: gunzip: %w", path, err)
	}
	if n > l.Bytes {
		return nil, l.err(path, "decompressed, it holds")
	}
	return buf.Bytes(), nil
}

// humanBytes writes n as KiB, MiB or GiB when it is a whole number of them.
func humanBytes(n int64) string {
	for _, u := range []struct {
		s    string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.s)
		}
	}
	return fmt.Sprintf("%d B", n)
}
