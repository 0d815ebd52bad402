package framedio

import (
	"bytes"
	stdgzip "compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// corpusBytes is n bytes of JSON Lines mixed with incompressible runs, the same for a seed.
func corpusBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	words := strings.Fields("the quick brown fox jumps over a lazy dog gload tokenizes 数据 données ✓")
	var b bytes.Buffer
	for line := 0; b.Len() < n; line++ {
		if line%50 == 7 {
			junk := make([]byte, r.IntN(3000))
			for i := range junk {
				junk[i] = byte(r.Uint32())
			}
			fmt.Fprintf(&b, "{\"bin\":%q}\n", junk)
			continue
		}
		b.WriteString(`{"text":"`)
		for range r.IntN(200) {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		b.WriteString("\"}\n")
	}
	return b.Bytes()[:n]
}

func compress(t testing.TB, data []byte, opt WriterOptions) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriter(&out, opt)
	if err != nil {
		t.Fatal(err)
	}
	// Uneven writes: frames must not depend on how the input arrives.
	for rest := data; len(rest) > 0; {
		k := min(len(rest), 1+len(rest)%7919)
		if _, err := w.Write(rest[:k]); err != nil {
			t.Fatal(err)
		}
		rest = rest[k:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// serial decodes with an ordinary stream decoder (the standard library's for gzip).
func serial(codec Codec, comp []byte) ([]byte, error) { return serialLimit(codec, comp, 1<<40) }

// serialLimit is serial that stops after limit bytes.
func serialLimit(codec Codec, comp []byte, limit int64) ([]byte, error) {
	var r io.Reader
	switch codec {
	case Zstd:
		zr, err := zstd.NewReader(bytes.NewReader(comp))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	default:
		gr, err := stdgzip.NewReader(bytes.NewReader(comp))
		if err != nil {
			return nil, err
		}
		r = gr
	}
	return io.ReadAll(io.LimitReader(r, limit))
}

func parallel(comp []byte, codec Codec, opt Options) ([]byte, error) {
	return parallelLimit(comp, codec, opt, 1<<40)
}

// parallelLimit is parallel that stops after limit bytes.
func parallelLimit(comp []byte, codec Codec, opt Options, limit int) ([]byte, error) {
	d := Open(bytes.NewReader(comp), int64(len(comp)), codec, opt)
	defer d.Close()
	var out bytes.Buffer
	buf := make([]byte, 777) // reads smaller than a frame
	for out.Len() < limit {
		n, err := d.Read(buf)
		out.Write(buf[:n])
		if errors.Is(err, io.EOF) {
			return out.Bytes(), nil
		}
		if err != nil {
			return out.Bytes(), err
		}
	}
	return out.Bytes()[:limit], nil
}

func TestRoundTripMatchesOrdinaryDecoders(t *testing.T) {
	data := corpusBytes(1<<20+12345, 1)
	cases := []struct {
		name  string
		wopt  WriterOptions
		codec Codec
	}{
		{"zstd 64KiB frames", WriterOptions{Codec: Zstd, FrameBytes: 64 << 10, Workers: 3}, Zstd},
		{"zstd 1MiB frames level 1", WriterOptions{Codec: Zstd, FrameBytes: 1 << 20, Level: 1}, Zstd},
		{"zstd odd frame size", WriterOptions{Codec: Zstd, FrameBytes: 99991, Level: 4, Workers: 1}, Zstd},
		{"bgzf", WriterOptions{Codec: BGZF, Workers: 4}, Gzip},
		{"bgzf level 1", WriterOptions{Codec: BGZF, Level: 1}, Gzip},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			comp := compress(t, data, c.wopt)
			if !Splittable(bytes.NewReader(comp), int64(len(comp)), c.codec) {
				t.Fatal("a file the writer made is not splittable")
			}
			ref, err := serial(c.codec, comp)
			if err != nil || !bytes.Equal(ref, data) {
				t.Fatalf("the ordinary decoder reads it as %d bytes, err %v (want %d)", len(ref), err, len(data))
			}
			for _, dec := range []int{1, 2, 4, 7} {
				for _, span := range []int64{1, 200 << 10} {
					got, err := parallel(comp, c.codec, Options{Decoders: dec, SpanBytes: span})
					if err != nil || !bytes.Equal(got, data) {
						t.Fatalf("decoders %d span %d: %d bytes, err %v (want %d identical)", dec, span, len(got), err, len(data))
					}
				}
			}
		})
	}
}

func TestWriterIsDeterministic(t *testing.T) {
	data := corpusBytes(1<<20, 2)
	for _, codec := range []Codec{Zstd, BGZF} {
		a := compress(t, data, WriterOptions{Codec: codec, FrameBytes: 100 << 10, Workers: 1})
		b := compress(t, data, WriterOptions{Codec: codec, FrameBytes: 100 << 10, Workers: 5})
		if !bytes.Equal(a, b) {
			t.Errorf("%s: 1 and 5 workers wrote different files", codec)
		}
	}
}

// mixedZstd is framed frames, then one frame of unknown size (a streaming
// encoder's), a skippable frame, and framed frames again.
func mixedZstd(t *testing.T, a, b, c []byte) []byte {
	var out bytes.Buffer
	out.Write(compress(t, a, WriterOptions{Codec: Zstd, FrameBytes: 50 << 10}))
	zw, err := zstd.NewWriter(&out)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(b)
	zw.Close()
	out.Write([]byte{0x5e, 0x2a, 0x4d, 0x18, 5, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'})
	out.Write(compress(t, c, WriterOptions{Codec: Zstd, FrameBytes: 70 << 10}))
	return out.Bytes()
}

func TestMixedLayouts(t *testing.T) {
	// Frames over maxFrame (and the streaming encoder's, of unknown size) are decoded serially.
	const maxFrame = 64 << 10
	a, b, c := corpusBytes(300<<10, 3), corpusBytes(maxFrame+100, 4), corpusBytes(200<<10, 5)
	want := bytes.Join([][]byte{a, b, c}, nil)
	t.Run("zstd serial frame inside", func(t *testing.T) {
		comp := mixedZstd(t, a, b, c)
		got, err := parallel(comp, Zstd, Options{Decoders: 3, MaxFrameBytes: maxFrame})
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes, err %v (want %d)", len(got), err, len(want))
		}
		w := newWalker(bytes.NewReader(comp), int64(len(comp)), Zstd, 1<<20, maxFrame)
		var kinds []string
		for _, sp := range allSpans(t, w) {
			if k := map[bool]string{true: "serial", false: "parallel"}[sp.serial]; len(kinds) == 0 || kinds[len(kinds)-1] != k {
				kinds = append(kinds, k)
			}
		}
		if strings.Join(kinds, ",") != "parallel,serial,parallel" {
			t.Errorf("runs of spans %v, want parallel,serial,parallel", kinds)
		}
	})
	t.Run("bgzf then plain gzip members", func(t *testing.T) {
		var comp bytes.Buffer
		comp.Write(compress(t, a, WriterOptions{Codec: BGZF}))
		for _, part := range [][]byte{b[:1000], b[1000:], c} {
			gw := stdgzip.NewWriter(&comp)
			gw.Write(part)
			gw.Close()
		}
		got, err := parallel(comp.Bytes(), Gzip, Options{Decoders: 2, MaxFrameBytes: maxFrame})
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes, err %v (want %d)", len(got), err, len(want))
		}
	})
}

func TestSplittable(t *testing.T) {
	data := corpusBytes(100<<10, 6)
	var plainGz, streamZstd bytes.Buffer
	gw := stdgzip.NewWriter(&plainGz)
	gw.Write(data)
	gw.Close()
	zw, _ := zstd.NewWriter(&streamZstd)
	zw.Write(corpusBytes(4<<20, 6))
	zw.Close()
	bigFrame, _ := zstd.NewWriter(nil)
	big := bigFrame.EncodeAll(corpusBytes(MaxFrameBytes+1, 7), nil)
	cases := []struct {
		name  string
		codec Codec
		b     []byte
		want  bool
	}{
		{"framed zstd", Zstd, compress(t, data, WriterOptions{Codec: Zstd, FrameBytes: 10 << 10}), true},
		{"one small zstd frame", Zstd, compress(t, data, WriterOptions{Codec: Zstd}), true},
		{"streaming zstd (size unknown)", Zstd, streamZstd.Bytes(), false},
		{"zstd frame over MaxFrameBytes", Zstd, big, false},
		{"skippable then framed", Zstd, append([]byte{0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0}, compress(t, data, WriterOptions{Codec: Zstd})...), true},
		{"bgzf", Gzip, compress(t, data, WriterOptions{Codec: BGZF}), true},
		{"plain gzip", Gzip, plainGz.Bytes(), false},
		{"empty", Gzip, nil, false},
		{"garbage", Zstd, []byte("not compressed at all"), false},
	}
	for _, c := range cases {
		if got := Splittable(bytes.NewReader(c.b), int64(len(c.b)), c.codec); got != c.want {
			t.Errorf("%s: Splittable = %v, want %v", c.name, got, c.want)
		}
	}
}

// Damage must surface as an error naming the frame, after exactly the bytes of the frames before it.
func TestDamageIsReportedWhereItIs(t *testing.T) {
	data := corpusBytes(1<<20, 8)
	for _, codec := range []Codec{Zstd, BGZF} {
		rc := Codec(map[Codec]Codec{Zstd: Zstd, BGZF: Gzip}[codec])
		comp := compress(t, data, WriterOptions{Codec: codec, FrameBytes: 64 << 10})
		spans := frameOffsets(t, comp, rc)
		mid := spans[len(spans)/2]
		cases := []struct {
			name string
			b    []byte
			want string
		}{
			{"truncated", comp[:mid.off+mid.n/2], fmt.Sprintf("frame at byte %d: truncated", mid.off)},
			{"payload byte flipped", flip(comp, mid.off+mid.n/2), fmt.Sprintf("frame at byte %d", mid.off)},
			{"trailing garbage", append(append([]byte{}, comp...), "garbage!!!!!"...), fmt.Sprintf("frame at byte %d: not a", len(comp))},
		}
		for _, c := range cases {
			t.Run(string(codec)+" "+c.name, func(t *testing.T) {
				got, err := parallel(c.b, rc, Options{Decoders: 3, SpanBytes: 1})
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err %v, want one containing %q", err, c.want)
				}
				// Every frame before the damaged one is delivered (its start is a frame boundary), then the error.
				var before int64
				for _, f := range spans {
					if f.off >= mid.off {
						break
					}
					before += f.out
				}
				if c.name == "trailing garbage" {
					before = int64(len(data))
				}
				if int64(len(got)) != before || !bytes.HasPrefix(data, got) {
					t.Fatalf("%d bytes before the error, want the %d of the frames before it", len(got), before)
				}
				if _, serr := serial(rc, c.b); serr == nil {
					t.Errorf("the ordinary decoder accepts what the parallel one refuses (%v)", err)
				}
			})
		}
	}
}

func flip(b []byte, at int64) []byte {
	c := append([]byte{}, b...)
	c[at] ^= 0x5a
	return c
}

func frameOffsets(t *testing.T, comp []byte, codec Codec) []frame {
	w := newWalker(bytes.NewReader(comp), int64(len(comp)), codec, 1, MaxFrameBytes)
	var out []frame
	for _, sp := range allSpans(t, w) {
		out = append(out, sp.frames...)
	}
	return out
}

// allSpans walks w to the end and returns its spans in order.
func allSpans(t *testing.T, w *walker) []span {
	t.Helper()
	var out []span
	for {
		sp, err := w.next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sp)
	}
}

// Close in the middle stops every goroutine, under load and with more decoders than cores.
func TestCloseMidwayLeavesNoGoroutines(t *testing.T) {
	data := corpusBytes(2<<20, 9)
	comp := compress(t, data, WriterOptions{Codec: Zstd, FrameBytes: 16 << 10})
	before := runtime.NumGoroutine()
	for i := range 50 {
		d := Open(bytes.NewReader(comp), int64(len(comp)), Zstd, Options{Decoders: 8, BudgetBytes: 1, SpanBytes: 1})
		buf := make([]byte, 1+i*1000)
		io.ReadFull(d, buf)
		d.Close()
		if _, err := d.Read(buf); err == nil {
			t.Fatal("Read after Close succeeded")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines left running (%d before)", n, before)
	}
}

func TestWriterOptionsErrors(t *testing.T) {
	for _, o := range []WriterOptions{{Codec: "lz4"}, {Codec: Zstd, Level: 9}, {Codec: Zstd, FrameBytes: MaxFrameBytes + 1}, {Codec: BGZF, Level: 10}} {
		if _, err := NewWriter(io.Discard, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// Stress: GOMAXPROCS above the core count, busy goroutines competing, many readers at once with tiny budgets and
// spans (every hand-off between walker, decoders and reader exercised): every copy identical.
func TestStressUnderLoad(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4 * runtime.NumCPU()))
	stop := make(chan struct{})
	defer close(stop)
	for range 2 * runtime.NumCPU() {
		go func() {
			for x := 0; ; x++ {
				select {
				case <-stop:
					return
				default:
				}
				_ = x * x
			}
		}()
	}
	data := corpusBytes(400<<10, 11)
	files := map[Codec][]byte{
		Zstd: compress(t, data, WriterOptions{Codec: Zstd, FrameBytes: 4 << 10}),
		Gzip: compress(t, data, WriterOptions{Codec: BGZF}),
	}
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			codec := []Codec{Zstd, Gzip}[i%2]
			got, err := parallel(files[codec], codec, Options{Decoders: 1 + i%5, SpanBytes: int64(1 + i*3000), BudgetBytes: 1})
			if err == nil && !bytes.Equal(got, data) {
				err = fmt.Errorf("reader %d (%s): %d bytes differ from the %d written", i, codec, len(got), len(data))
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// A decoder's error stays reachable with errors.Is, and the message does not repeat the codec's name.
func TestDecoderErrorsWrapTheCause(t *testing.T) {
	comp := compress(t, corpusBytes(200<<10, 12), WriterOptions{Codec: BGZF})
	spans := frameOffsets(t, comp, Gzip)
	bad := append([]byte{}, comp...)
	bad[spans[1].off+spans[1].n-8] ^= 1 // the second member's CRC-32
	_, err := parallel(bad, Gzip, Options{Decoders: 2})
	if !errors.Is(err, gzip.ErrChecksum) {
		t.Fatalf("err %v", err)
	}
	if want := fmt.Sprintf("gzip: frame at byte %d: invalid checksum", spans[1].off); err.Error() != want {
		t.Fatalf("err %q, want %q", err, want)
	}
	var fe *formatError
	if !errors.As(err, &fe) || fe.cause == nil {
		t.Fatalf("err %v does not carry the decoder's error", err)
	}
}

// A frame left for the next span is parsed once: no re-walk of a big serial frame's block headers (or of the frame
// that would overflow a span) on the next call.
func TestWalkerParsesEachFrameOnce(t *testing.T) {
	a, b := corpusBytes(300<<10, 13), corpusBytes(200<<10, 14)
	comp := mixedZstd(t, a, b, a)
	w := newWalker(bytes.NewReader(comp), int64(len(comp)), Zstd, 1<<20, 64<<10)
	frames := 1 // mixedZstd's skippable frame
	for _, sp := range allSpans(t, w) {
		if sp.serial {
			frames++
		}
		frames += len(sp.frames)
	}
	if w.parsed != frames {
		t.Fatalf("%d frame headers parsed for %d frames", w.parsed, frames)
	}
}
