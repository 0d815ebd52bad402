package loader_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/proto/gloadpb"
)

// planWithin calls Plan and fails the test when it has not answered after
// two minutes: planning that spins (issue 34) fails the test instead of
// hanging it.
func planWithin(t *testing.T, ctx context.Context, c interface {
	Plan(context.Context, *gloadpb.Open) (*gloadpb.PlanResponse, error)
}, open *gloadpb.Open) (*gloadpb.PlanResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	resp, err := c.Plan(ctx, open)
	if status.Code(err) == codes.DeadlineExceeded {
		t.Fatalf("Plan has not answered after two minutes: %v", err)
	}
	return resp, err
}

// TestPlanHostileInputs sends Opens with epoch lengths, epochs, weights and
// policy fields chosen to make planning overflow, spin or allocate without
// bound, through a real server's gRPC API: each is answered at once, with
// a status naming the field or the limit, or planned when it is harmless.
func TestPlanHostileInputs(t *testing.T) {
	f := newMixFixture(t, t.TempDir())
	c := dial(t, f.ts.addr)
	mix := func(w ...float64) []*gloadpb.MixtureSource {
		var out []*gloadpb.MixtureSource
		for i, x := range w {
			out = append(out, &gloadpb.MixtureSource{Dataset: f.names[i], Weight: x})
		}
		return out
	}
	bucketed := &gloadpb.BatchPolicy{BatchSize: 8}
	for _, tc := range []struct {
		name string
		open *gloadpb.Open
		code codes.Code // OK: the plan is made
		msg  string
	}{
		{"epoch_samples 2^64-1", &gloadpb.Open{Mixture: mix(6, 3, 1), EpochSamples: math.MaxUint64}, codes.ResourceExhausted,
			"rows per mixture epoch) (this server's --max-mixture-rows is 134217728"},
		{"epoch_samples 2^63-1", &gloadpb.Open{Mixture: mix(6, 3, 1), EpochSamples: math.MaxInt64}, codes.ResourceExhausted, "--max-mixture-rows"},
		{"epoch_samples 2^31-1", &gloadpb.Open{Mixture: mix(6, 3, 1), EpochSamples: math.MaxInt32}, codes.ResourceExhausted,
			"open.mixture: mixture epoch of 2147483647 rows: bucket: too large (at most 134217728 rows per mixture epoch)"},
		{"epoch_samples of the server's mixture", &gloadpb.Open{Dataset: "pretrain", EpochSamples: math.MaxInt64}, codes.InvalidArgument,
			`mixture "pretrain" is defined by the server`},
		{"epoch_tokens 2^64-1", &gloadpb.Open{Mixture: mix(6, 3, 1), MixBy: "tokens", EpochTokens: math.MaxUint64}, codes.ResourceExhausted, "--max-mixture-rows"},
		{"epoch_tokens 2^40", &gloadpb.Open{Mixture: mix(6, 3, 1), MixBy: "tokens", EpochTokens: 1 << 40}, codes.ResourceExhausted, "rows per mixture epoch"},
		{"tokens epoch 2^32-1", &gloadpb.Open{Mixture: mix(6, 3, 1), MixBy: "tokens", Epoch: math.MaxUint32}, codes.ResourceExhausted,
			"found by walking at least"},
		{"tokens epoch 10^7", &gloadpb.Open{Mixture: mix(6, 3, 1), MixBy: "tokens", Epoch: 10_000_000}, codes.ResourceExhausted, "at most 2147483648"},
		{"tokens epoch_until of a tiny weight", &gloadpb.Open{Mixture: mix(1, 1, 1e-11), MixBy: "tokens", EpochUntil: "math"}, codes.ResourceExhausted, "rows per mixture epoch"},
		{"epoch_until of a tiny weight", &gloadpb.Open{Mixture: mix(1, 1, 1e-9), EpochUntil: "math"}, codes.ResourceExhausted, "rows per mixture epoch"},
		{"weight rounding to 0", &gloadpb.Open{Mixture: mix(1, 1, 1e-13), EpochUntil: "math"}, codes.InvalidArgument,
			`open.mixture: source "math": weight 1e-13 is less than 1e-12 of the sum`},
		{"weight NaN", &gloadpb.Open{Mixture: mix(1, math.NaN(), 1)}, codes.InvalidArgument, "weight NaN must be a finite number"},
		{"weight +Inf", &gloadpb.Open{Mixture: mix(1, math.Inf(1), 1)}, codes.InvalidArgument, "weight +Inf must be a finite number"},
		{"weights overflowing their sum", &gloadpb.Open{Mixture: mix(math.MaxFloat64, math.MaxFloat64, 1)}, codes.InvalidArgument, "weights sum to +Inf"},
		{"huge weights", &gloadpb.Open{Mixture: mix(1e300, 5e299, 1e299)}, codes.OK, ""},
		{"samples epoch 2^32-1", &gloadpb.Open{Mixture: mix(6, 3, 1), Epoch: math.MaxUint32}, codes.OK, ""},
		{"bucketed batch_size 2^32-1", &gloadpb.Open{Dataset: "web", Policy: &gloadpb.BatchPolicy{BatchSize: math.MaxUint32}}, codes.InvalidArgument,
			"policy.batch_size: must be <= 2147483647"},
		{"bucketed batch_size 2^31-1", &gloadpb.Open{Dataset: "web", Policy: &gloadpb.BatchPolicy{BatchSize: math.MaxInt32, MegaBatchMult: math.MaxInt32}}, codes.OK, ""},
		{"pad_multiple 2^31-1", &gloadpb.Open{Dataset: "web", Policy: &gloadpb.BatchPolicy{BatchSize: 8, PadMultiple: math.MaxInt32}}, codes.InvalidArgument,
			"policy.batch_size: batches of 8×2147483647 tokens"},
		{"tokens token_budget 2^31-1", &gloadpb.Open{Dataset: "web", Policy: &gloadpb.BatchPolicy{Policy: "tokens", TokenBudget: math.MaxInt32}}, codes.OK, ""},
		{"packed seq_len 2^31-1", &gloadpb.Open{Dataset: "web", Policy: &gloadpb.BatchPolicy{Policy: "packed", SeqLen: math.MaxInt32, BatchSize: math.MaxInt32}}, codes.InvalidArgument,
			"policy.batch_size: batches of"},
		{"packed seq_len 1 split", &gloadpb.Open{Dataset: "web", Policy: &gloadpb.BatchPolicy{Policy: "packed", SeqLen: 1, BatchSize: 1, SplitDocs: true}}, codes.OK, ""},
		{"auto_buckets 2^32-1", &gloadpb.Open{Dataset: "web", Policy: &gloadpb.BatchPolicy{BatchSize: 8, AutoBuckets: math.MaxUint32}}, codes.InvalidArgument, "policy.auto_buckets"},
		{"boundaries 200 000", &gloadpb.Open{Dataset: "web", Policy: &gloadpb.BatchPolicy{BatchSize: 8, Boundaries: ascending(200_000)}}, codes.OK, ""},
		{"boundaries descending", &gloadpb.Open{Dataset: "web", Policy: &gloadpb.BatchPolicy{BatchSize: 8, Boundaries: []uint32{64, 32}}}, codes.InvalidArgument,
			"policy.boundaries: must be strictly ascending"},
		{"mixture of a packed huge seq_len", &gloadpb.Open{Mixture: mix(6, 3, 1), Policy: &gloadpb.BatchPolicy{Policy: "packed", SeqLen: math.MaxInt32, BatchSize: 1}}, codes.InvalidArgument,
			"policy.batch_size: batches of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.open.Policy == nil {
				tc.open.Policy = bucketed
			}
			_, err := planWithin(t, t.Context(), c, tc.open)
			st := status.Convert(err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
				t.Fatalf("error %v, want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}
}

// ascending returns the boundaries 64, 128, … (n of them).
func ascending(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(64 * (i + 1))
	}
	return out
}

// slowMixture is an Open whose plan is legal but takes seconds: epoch 100 000
// of a mix_by=tokens mixture replays about 1.3·10⁹ rows to find its start.
func slowMixture(f *mixFixture) *gloadpb.Open {
	var ws []*gloadpb.MixtureSource
	for i, w := range []float64{6, 3, 1} {
		ws = append(ws, &gloadpb.MixtureSource{Dataset: f.names[i], Weight: w})
	}
	return &gloadpb.Open{Mixture: ws, MixBy: "tokens", Epoch: 100_000, Policy: &gloadpb.BatchPolicy{BatchSize: 8}}
}

// planMisses is the number of plans the server finished computing.
func planMisses(t *testing.T, srv *loader.Server) float64 {
	return max(metricValue(scrape(t, srv), `gload_plan_cache_requests_total{result="miss"}`), 0)
}

// TestPlanAbandoned: a plan whose only caller left stops: the server ends
// without finishing it (on the old code the handler kept planning after the
// client left, and the server's stop waited for it).
func TestPlanAbandoned(t *testing.T) {
	f := newMixFixture(t, t.TempDir())
	c := dial(t, f.ts.addr)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := c.Plan(ctx, slowMixture(f))
		done <- err
	}()
	time.Sleep(time.Second) // let the request reach the server (not needed for the new code to pass)
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("Plan: %v, want Canceled", err)
	}
	f.ts.stop(t) // waits for every plan computation to end
	if n := planMisses(t, f.ts.srv); n != 0 {
		t.Fatalf("the server finished %v plans nobody waited for", n)
	}
}

// TestPlanShutdown: stopping a server (SIGTERM in gload serve) while a
// client waits for a long plan ends the plan after the drain timeout; the
// client gets an error rather than a plan.
func TestPlanShutdown(t *testing.T) {
	f := newMixFixture(t, t.TempDir())
	f.ts.stop(t)
	cfg := loader.Config{Datasets: map[string]string{}, ShmDir: t.TempDir(), DrainTimeout: 100 * time.Millisecond}
	for _, n := range f.names {
		cfg.Datasets[n] = f.dirs[n]
	}
	ts := startServer(t, cfg, "unix")
	c := dial(t, ts.addr)
	done := make(chan error, 1)
	go func() {
		_, err := c.Plan(t.Context(), slowMixture(f))
		done <- err
	}()
	time.Sleep(time.Second) // let the request reach the server (not needed for the new code to pass)
	ts.stop(t)
	if err := <-done; err == nil {
		t.Fatal("Plan answered with a plan during shutdown")
	}
	if n := planMisses(t, ts.srv); n != 0 {
		t.Fatalf("the stopping server finished %v plans", n)
	}
}
