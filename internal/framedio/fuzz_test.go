package framedio

import (
	"bytes"
	"errors"
	"io"
	"runtime/debug"
	"testing"
	"time"
)

// FuzzDecode feeds arbitrary bytes to the frame walker and the parallel
// decoder, as zstd and as gzip: no panic, no hang, spans in order inside the
// file, and whatever the ordinary decoder accepts the parallel one returns
// byte for byte (and the other way round).
func FuzzDecode(f *testing.F) {
	data := corpusBytes(20<<10, 10)
	f.Add(compress(f, data, WriterOptions{Codec: Zstd, FrameBytes: 3000}), false)
	f.Add(compress(f, data, WriterOptions{Codec: BGZF}), true)
	f.Add(compress(f, data[:100], WriterOptions{Codec: Zstd}), false)
	f.Add(compress(f, data[:100], WriterOptions{Codec: BGZF}), true)
	f.Add([]byte{0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0}, false)
	f.Add(bgzfEOF, true)
	f.Fuzz(func(t *testing.T, b []byte, gz bool) {
		tm := time.AfterFunc(5*time.Second, func() { debug.SetTraceback("all"); panic("WATCHDOG") })
		defer tm.Stop()
		codec := Zstd
		if gz {
			codec = Gzip
		}
		w := newWalker(bytes.NewReader(b), int64(len(b)), codec, 1000, 64<<10)
		end := int64(0)
		for i := 0; ; i++ {
			sp, err := w.next()
			if err != nil {
				break
			}
			if sp.off < end || sp.off+sp.n > int64(len(b)) || sp.n <= 0 {
				t.Fatalf("span %d at %d+%d: outside the file or before the previous end %d", i, sp.off, sp.n, end)
			}
			end = sp.off + sp.n
			if i > len(b) {
				t.Fatal("more spans than bytes")
			}
		}
		// A few bytes can state gigabytes (zstd RLE blocks): compare the first 4 MiB.
		const limit = 4 << 20
		got, perr := parallelLimit(b, codec, Options{Decoders: 2, SpanBytes: 1000, MaxFrameBytes: 64 << 10}, limit)
		want, serr := serialLimit(codec, b, limit)
		if perr == nil && serr == nil && !bytes.Equal(got, want) {
			t.Fatalf("both decoders accept the input but disagree: %d vs %d bytes", len(got), len(want))
		}
		if (perr == nil) != (serr == nil) && len(b) > 0 {
			// The parallel decoder may be stricter than gzip's stream decoder about a member's stated size, never
			// looser: it must not accept what the ordinary decoder refuses.
			if perr == nil {
				t.Fatalf("the parallel decoder accepts what the ordinary one refuses: %v", serr)
			}
			if !errors.Is(perr, io.ErrUnexpectedEOF) {
				var fe *formatError
				if !errors.As(perr, &fe) {
					t.Fatalf("parallel error %v is not a frame error", perr)
				}
			}
		}
	})
}
