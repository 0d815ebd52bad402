package gpuwatch

import (
	"strings"
	"testing"
	"time"
)

// TestStreamClosed: a client whose last stream ended is marked closed (its
// queue no longer reported as full), one that never reported a step is
// dropped, and a new stream (SetQueue) reopens it.
func TestStreamClosed(t *testing.T) {
	clk := newClock()
	w := New(nil, Options{Now: clk.Now})
	w.SetQueue("stepper", 16, 16)
	w.RecordStep("stepper", 100, 900, time.Time{})
	w.SetQueue("quiet", 16, 16)
	w.StreamClosed("nobody") // unknown: no effect
	clk.Set(2)
	w.StreamClosed("stepper")
	w.StreamClosed("quiet")
	clk.Set(5)
	r := w.Report()
	if len(r.Clients) != 1 || r.Clients[0].Client != "stepper" {
		t.Fatalf("clients %+v, want stepper alone (quiet never reported a step)", r.Clients)
	}
	c := r.Clients[0]
	if !c.Closed || c.ClosedS != 3 || c.QueueDepth != 0 || c.QueueCapacity != 0 || c.Steps != 1 {
		t.Fatalf("closed client: %+v", c)
	}
	text := Format(r)
	if strings.Contains(text, "16/16") || !strings.Contains(text, "closed") || !strings.Contains(text, "stream closed 3") {
		t.Fatalf("report text:\n%s", text)
	}
	w.SetQueue("stepper", 2, 8) // a new stream
	if c := w.Report().Clients[0]; c.Closed || c.QueueDepth != 2 || c.QueueCapacity != 8 {
		t.Fatalf("reopened client: %+v", c)
	}
}
