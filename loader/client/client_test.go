package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "unix:///run/g.sock", want: "unix:///run/g.sock"},
		{in: "unix:rel.sock", want: "unix:rel.sock"},
		{in: "127.0.0.1:7700", want: "passthrough:///127.0.0.1:7700"},
		{in: "[::1]:1", want: "passthrough:///[::1]:1"},
		{in: "unix://rel.sock", bad: true},
		{in: "dns:///x:1", bad: true},
		{in: "hostonly", bad: true},
		{in: "", bad: true},
	} {
		got, err := target(tc.in)
		if tc.bad {
			if !errors.Is(err, ErrAddress) {
				t.Errorf("target(%q) = %q, %v; want ErrAddress", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("target(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestDialFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Dial(ctx, "unix:///nonexistent/dir/g.sock"); err == nil {
		t.Fatal("dialed a socket that does not exist")
	}
	if _, err := Dial(ctx, "bad"); !errors.Is(err, ErrAddress) {
		t.Fatalf("bad address: %v", err)
	}
}

func TestBlockPool(t *testing.T) {
	p := &blockPool{}
	for _, n := range []int{0, 1, 8191, 8192, 8193, 1 << 20} {
		k := p.get(n)
		if len(k.bytes()) != n || len(k.words)*8 < n {
			t.Fatalf("get(%d): %d bytes, %d words", n, len(k.bytes()), len(k.words))
		}
		p.put(k)
	}
	p.put(nil)
	p.put(&block{words: make([]uint64, 3)}) // odd sizes are dropped
}
