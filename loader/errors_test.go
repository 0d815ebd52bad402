package loader_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/proto/gloadpb"
)

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(200, 1, 100, 5), 200, 50)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"wiki": dir, "code": dir}, MaxBatchBytes: 1 << 16}, "unix")
	c := dial(t, ts.addr)
	base := &gloadpb.Open{Dataset: "wiki", Seed: 1, Epoch: 3, Policy: &gloadpb.BatchPolicy{BatchSize: 4}, WorldSize: 2, NumWorkers: 2}
	pr, err := c.Plan(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	good := pr.Start
	if good.Fingerprint == "" || good.PolicyHash == "" || good.PlanWorld != 2 {
		t.Fatalf("plan start state %v", good)
	}
	resume := func(f func(r *gloadpb.ResumeState)) func(o *gloadpb.Open) {
		return func(o *gloadpb.Open) {
			r := cloneOpen(&gloadpb.Open{Resume: good}).Resume
			f(r)
			o.Resume = r
		}
	}
	cases := []struct {
		name string
		edit func(o *gloadpb.Open)
		code codes.Code
		want []string
	}{
		{"unknown dataset", func(o *gloadpb.Open) { o.Dataset = "nope" }, codes.NotFound, []string{"dataset", `"nope"`, "code, wiki"}},
		{"rank >= world", func(o *gloadpb.Open) { o.Rank = 2 }, codes.InvalidArgument, []string{"rank", "world_size 2"}},
		{"rank with world 0", func(o *gloadpb.Open) { o.Rank, o.WorldSize = 1, 0 }, codes.InvalidArgument, []string{"rank"}},
		{"world too large", func(o *gloadpb.Open) { o.WorldSize, o.Rank, o.Worker = 1<<25, 0, 0 }, codes.InvalidArgument, []string{"world_size"}},
		{"worker >= workers", func(o *gloadpb.Open) { o.Worker = 5 }, codes.InvalidArgument, []string{"worker", "num_workers 2"}},
		{"batch size 0", func(o *gloadpb.Open) { o.Policy.BatchSize = 0 }, codes.InvalidArgument, []string{"policy.batch_size"}},
		{"no policy", func(o *gloadpb.Open) { o.Policy = nil }, codes.InvalidArgument, []string{"policy.batch_size"}},
		{"token budget below a sample", func(o *gloadpb.Open) {
			o.Policy = &gloadpb.BatchPolicy{Policy: "tokens", TokenBudget: 16}
		}, codes.InvalidArgument, []string{"policy.token_budget"}},
		{"token budget under bucketed", func(o *gloadpb.Open) { o.Policy.TokenBudget = 100 }, codes.InvalidArgument, []string{"policy.token_budget"}},
		{"packed without seq_len", func(o *gloadpb.Open) { o.Policy.Policy = "packed" }, codes.InvalidArgument, []string{"policy.seq_len"}},
		{"unknown policy", func(o *gloadpb.Open) { o.Policy.Policy = "sorted" }, codes.InvalidArgument, []string{"policy.policy", `"sorted"`}},
		{"unknown remainder", func(o *gloadpb.Open) { o.Policy.Remainder = "pad" }, codes.InvalidArgument, []string{"policy.remainder", `"pad"`}},
		{"unknown planner", func(o *gloadpb.Open) { o.Policy.Planner = "fast" }, codes.InvalidArgument, []string{"policy.planner", `"fast"`}},
		{"lazy planner, auto buckets", func(o *gloadpb.Open) { o.Policy.Planner, o.Policy.AutoBuckets = "lazy", 4 }, codes.InvalidArgument,
			[]string{"policy.auto_buckets", "lazy plan"}},
		{"resume under another planner", func(o *gloadpb.Open) { resume(func(*gloadpb.ResumeState) {})(o); o.Policy.Planner = "lazy" },
			codes.FailedPrecondition, []string{"resume.policy_hash"}},
		{"sequential packed", func(o *gloadpb.Open) { o.Policy.Policy, o.Policy.SeqLen, o.Policy.Sequential = "packed", 64, true }, codes.InvalidArgument, []string{"policy.sequential"}},
		{"boundaries not ascending", func(o *gloadpb.Open) { o.Policy.Boundaries = []uint32{64, 32} }, codes.InvalidArgument, []string{"policy.boundaries"}},
		{"negative position start", func(o *gloadpb.Open) { o.Policy.PositionStart = -1 }, codes.InvalidArgument, []string{"policy.position_start"}},
		{"position start 2^31-1", func(o *gloadpb.Open) { o.Policy.PositionStart = math.MaxInt32 }, codes.InvalidArgument,
			[]string{"policy.position_start", "2147483647", "exceed int32"}},
		{"position ids past 2^31-1 in packed rows", func(o *gloadpb.Open) {
			o.Policy = &gloadpb.BatchPolicy{Policy: "packed", BatchSize: 2, SeqLen: 128, PositionStart: math.MaxInt32 - 126}
		}, codes.InvalidArgument, []string{"policy.position_start", "128-token rows", "at most 2147483520"}},
		{"batch over the server limit", func(o *gloadpb.Open) {
			o.Policy.BatchSize = 200
		}, codes.InvalidArgument, []string{"policy.batch_size", "limit", "--max-batch-bytes", "max_length", "--max-length"}},
		{"unknown transport", func(o *gloadpb.Open) { o.Transport = 9 }, codes.InvalidArgument, []string{"transport", "9"}},
		{"resume other fingerprint", resume(func(r *gloadpb.ResumeState) { r.Fingerprint = "0123456789abcdef" }),
			codes.FailedPrecondition, []string{"resume.fingerprint", "dataset changed since the state was saved"}},
		{"resume other seed", resume(func(r *gloadpb.ResumeState) { r.Seed = 2 }), codes.FailedPrecondition, []string{"resume.seed"}},
		{"resume other epoch", resume(func(r *gloadpb.ResumeState) { r.Epoch = 4 }), codes.FailedPrecondition, []string{"resume.epoch"}},
		{"resume other policy", resume(func(r *gloadpb.ResumeState) { r.PolicyHash = "feedfacefeedface" }),
			codes.FailedPrecondition, []string{"resume.policy_hash"}},
		{"resume beyond the plan", resume(func(r *gloadpb.ResumeState) { r.Consumed = 1 << 50 }), codes.InvalidArgument, []string{"resume.consumed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			open := cloneOpen(base)
			tc.edit(open)
			_, err := c.Stream(t.Context(), open)
			checkStatus(t, "Batches", err, tc.code, tc.want)
			_, err = c.Plan(t.Context(), open)
			checkStatus(t, "Plan", err, tc.code, tc.want)
		})
	}
	// A state that matches resumes fine, past the end it gives no batches.
	open := cloneOpen(base)
	open.Resume = cloneOpen(&gloadpb.Open{Resume: good}).Resume
	open.Resume.Consumed = 1000
	bs, _, opened, err := pullAll(t.Context(), c, open, -1)
	if err != nil || len(bs) != 0 || opened.Batches != 0 {
		t.Fatalf("resume past the end: %d batches (opened says %d), %v", len(bs), opened.GetBatches(), err)
	}
}

func checkStatus(t *testing.T, rpc string, err error, code codes.Code, want []string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: got %v, want code %s", rpc, err, code)
	}
	msg := status.Convert(err).Message()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: message %q does not mention %q", rpc, msg, w)
		}
	}
}

// TestProtocolErrors drives the stream with raw gRPC: messages out of order.
func TestProtocolErrors(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(100, 1, 50, 6), 100, 50)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}}, "unix")
	cc, err := grpc.NewClient(ts.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := gloadpb.NewLoaderClient(cc)
	open := &gloadpb.ClientMessage{Msg: &gloadpb.ClientMessage_Open{Open: &gloadpb.Open{
		Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 2}, Prefetch: 2}}}
	ack := func(seq uint64) *gloadpb.ClientMessage {
		return &gloadpb.ClientMessage{Msg: &gloadpb.ClientMessage_Ack{Ack: &gloadpb.Ack{Seq: seq}}}
	}
	cases := []struct {
		name string
		msgs []*gloadpb.ClientMessage
		code codes.Code
		want string
	}{
		{"ack first", []*gloadpb.ClientMessage{ack(0)}, codes.InvalidArgument, "open"},
		{"empty first", []*gloadpb.ClientMessage{{}}, codes.InvalidArgument, "open"},
		{"ack never sent", []*gloadpb.ClientMessage{open, ack(7)}, codes.InvalidArgument, "ack: batch 7"},
		{"ack twice", []*gloadpb.ClientMessage{open, ack(0), ack(0)}, codes.InvalidArgument, "ack: batch 0"},
		{"open twice", []*gloadpb.ClientMessage{open, open}, codes.InvalidArgument, "open: sent twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			st, err := api.Batches(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tc.msgs {
				if err := st.Send(m); err != nil {
					break
				}
			}
			for {
				_, err = st.Recv()
				if err != nil {
					break
				}
			}
			checkStatus(t, "Batches", err, tc.code, []string{tc.want})
		})
	}
	// Closing the stream before open.
	st, err := api.Batches(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	st.CloseSend()
	_, err = st.Recv()
	checkStatus(t, "Batches", err, codes.InvalidArgument, []string{"open"})
}
