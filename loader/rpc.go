package loader

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/proto/gloadpb"
)

// ListDatasets describes the datasets this server was started with.
func (s *Server) ListDatasets(context.Context, *gloadpb.ListDatasetsRequest) (*gloadpb.ListDatasetsResponse, error) {
	out := &gloadpb.ListDatasetsResponse{}
	for _, n := range s.names {
		out.Datasets = append(out.Datasets, s.datasets[n].info)
	}
	for _, n := range sortedNamesOf(s.mixtures) {
		out.Datasets = append(out.Datasets, s.mixtures[n].info)
	}
	out.Datasets = append(out.Datasets, s.pathInfos()...)
	return out, nil
}

// Health says whether the server is serving and what it serves.
func (s *Server) Health(context.Context, *gloadpb.HealthRequest) (*gloadpb.HealthResponse, error) {
	h := &gloadpb.HealthResponse{
		Serving:  !s.draining.Load(),
		Version:  s.cfg.Version,
		Datasets: append([]string(nil), s.names...),
		Streams:  uint32(s.streams.Load()),
		UptimeS:  s.now().Sub(s.started).Seconds(),
	}
	for _, n := range s.names {
		h.DatasetInfo = append(h.DatasetInfo, s.datasets[n].info)
	}
	for _, info := range s.pathInfos() {
		h.Datasets = append(h.Datasets, info.Name)
		h.DatasetInfo = append(h.DatasetInfo, info)
	}
	return h, nil
}

// Plan describes one consumer's share of an epoch without streaming it.
func (s *Server) Plan(ctx context.Context, req *gloadpb.PlanRequest) (*gloadpb.PlanResponse, error) {
	c, err := s.resolve(ctx, req.GetOpen())
	if err != nil {
		return nil, err
	}
	st := c.plan.Stats()
	return &gloadpb.PlanResponse{
		Batches:       uint64(c.assigned.Len()),
		GlobalBatches: uint64(c.plan.Len()),
		Shapes:        wireShapes(c.plan.Shapes()),
		PaddingShare:  st.PaddingShare,
		Start:         c.start,
		Sources:       c.ds.sourceNames(),
		SourceOffsets: c.ds.sourceOffsets(),
		Shares:        wireShares(c.plan),
		Fingerprint:   c.ds.info.Fingerprint,
		PlanHash:      planHash(c.plan),
	}, nil
}

// planHash is the hash of a whole epoch plan: its own Hash (exact plans: bucket.HashBatches over their batches;
// lazy plans: their inputs and algorithm, never their batches), else bucket.HashBatches.
func planHash(p epochPlan) string {
	if h, ok := p.(interface{ Hash() string }); ok {
		return h.Hash()
	}
	return bucket.HashBatches(p.Len(), p.Batch)
}

func wireShapes(shapes []bucket.Shape) []*gloadpb.Shape {
	out := make([]*gloadpb.Shape, len(shapes))
	for i, sh := range shapes {
		out[i] = &gloadpb.Shape{Rows: uint32(sh.Rows), Length: uint32(sh.Length)}
	}
	return out
}

// consumer is one validated Open: the plan and this consumer's share of it.
type consumer struct {
	ds                           *served
	open                         *gloadpb.Open
	cfg                          bucket.Config
	plan                         epochPlan
	start                        *gloadpb.ResumeState
	rank, world, worker, workers int
	assigned                     bucket.Assignment // this consumer's batches, dealt on demand
	padID                        int32             // what input_ids are padded with (see padID)
}

// resolve validates an Open and finds (or computes) its plan. Its errors are
// gRPC statuses whose message names the offending field.
// Planning stops, and resolve returns ctx's status, once ctx ends.
func (s *Server) resolve(ctx context.Context, open *gloadpb.Open) (*consumer, error) {
	if open == nil {
		return nil, status.Error(codes.InvalidArgument, "open: missing (the first message of a stream must be open)")
	}
	d, err := s.mixTarget(open)
	if err != nil {
		return nil, err
	}
	if d == nil {
		var ok bool
		if d, ok = s.lookupDataset(open.Dataset); !ok {
			if d, ok = s.mixtures[open.Dataset]; !ok {
				return nil, status.Errorf(codes.NotFound, "dataset: %q is not served here; this server serves: %s",
					open.Dataset, strings.Join(append(slices.Clone(s.names), sortedNamesOf(s.mixtures)...), ", "))
			}
		}
	}
	if err := d.check(); err != nil {
		s.log.Warn("dataset refused", "dataset", d.name, "err", err)
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	world, workers := int(max(open.WorldSize, 1)), int(max(open.NumWorkers, 1))
	if int(open.Rank) >= world {
		return nil, status.Errorf(codes.InvalidArgument, "rank: %d must be less than world_size %d", open.Rank, world)
	}
	if int(open.Worker) >= workers {
		return nil, status.Errorf(codes.InvalidArgument, "worker: %d must be less than num_workers %d", open.Worker, workers)
	}
	switch open.Transport {
	case gloadpb.Transport_TRANSPORT_GRPC:
	case gloadpb.Transport_TRANSPORT_SHM:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "transport: unknown value %d", int32(open.Transport))
	}
	if ps := open.GetPolicy().GetPositionStart(); ps < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "policy.position_start: %d must be >= 0", ps)
	}

	planWorld := world
	var consumed uint64
	probe := policyConfig(open.Policy, 1)
	phash := policyHash(probe)
	if r := open.Resume; r != nil {
		if r.Fingerprint != d.info.Fingerprint && d.mix != nil {
			return nil, status.Errorf(codes.FailedPrecondition,
				"resume.fingerprint: the state was saved under another mixture (state %s, mixture %s now %s): "+
					"weights, sources or epoch length changed, which makes a new plan; resume with the old mixture or start the new one without resume state",
				r.Fingerprint, d.name, d.info.Fingerprint)
		}
		if r.Fingerprint != d.info.Fingerprint {
			return nil, status.Errorf(codes.FailedPrecondition,
				"resume.fingerprint: dataset changed since the state was saved (state %s, dataset %s now %s)",
				r.Fingerprint, d.name, d.info.Fingerprint)
		}
		if r.Seed != open.Seed {
			return nil, status.Errorf(codes.FailedPrecondition, "resume.seed: the state was saved with seed %d, open asks for %d", r.Seed, open.Seed)
		}
		if r.Epoch != open.Epoch {
			return nil, status.Errorf(codes.FailedPrecondition, "resume.epoch: the state was saved in epoch %d, open asks for %d", r.Epoch, open.Epoch)
		}
		planWorld = int(max(r.PlanWorld, 1))
		consumed = r.Consumed
	}
	if consumed > 2*bucket.MaxPlanRows { // a plan has at most one batch per row (wrap deals at most world−1 more)
		return nil, status.Errorf(codes.InvalidArgument, "resume.consumed: %d is beyond any plan (at most %d batches)", consumed, int64(bucket.MaxPlanRows))
	}
	cfg := policyConfig(open.Policy, planWorld)
	key := planKey{fingerprint: d.info.Fingerprint, seed: open.Seed, epoch: int(open.Epoch), policy: phash, planWorld: planWorld}
	var plan epochPlan
	if d.mix != nil {
		m := d.mix
		plan, err = s.plans.getWith(ctx, key, string(cfg.Policy), func(pctx context.Context) (epochPlan, error) {
			mp, err := bucket.NewEpochMixture(pctx, m.sources, open.Seed, int(open.Epoch), cfg, m.mc, bucket.Parallel)
			if err != nil {
				return nil, err
			}
			return &mixPlan{MixturePlan: mp, offsets: m.offsets}, nil
		})
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if errors.Is(err, context.Canceled) {
			return nil, status.Error(codes.Unavailable, "plan: the server is stopping")
		}
		if err != nil {
			return nil, mixStatus("open.mixture", err, s.cfg.MaxMixtureRows)
		}
	} else {
		plan, err = s.plans.get(ctx, key, d.ds.LengthSource(), cfg)
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if err != nil {
			return nil, planStatus(err)
		}
	}
	if err := d.lengthsErr(); err != nil {
		s.log.Warn("dataset refused", "dataset", d.name, "err", err)
		return nil, status.Errorf(codes.FailedPrecondition, "dataset %s: %v", d.name, err)
	}
	// The policy hash is checked once the plan is known: a lazy plan folds its algorithm into it (resumeHash).
	rhash := resumeHash(probe, plan)
	if r := open.Resume; r != nil && r.PolicyHash != rhash {
		if a, lazy := plan.(interface{ Algorithm() string }); lazy && r.PolicyHash == phash {
			return nil, status.Errorf(codes.FailedPrecondition,
				"resume.policy_hash: the state was saved from an exact plan, and this server plans %s past %d rows with %s, "+
					"a different plan: start the epoch without resume state, or resume it with the gload version that saved it",
				d.name, bucket.LazyThreshold, a.Algorithm())
		}
		return nil, status.Errorf(codes.FailedPrecondition,
			"resume.policy_hash: the batch policy differs from the one the state was saved with (state %q, policy %q)", r.PolicyHash, rhash)
	}
	assigned, err := bucket.Deal(plan.Len(), cfg.Remainder, int(consumed), int(open.Rank), world, int(open.Worker), workers)
	if err != nil {
		return nil, planStatus(err)
	}
	if err := s.checkShapes(plan, cfg); err != nil {
		return nil, err
	}
	if err := checkPositions(open.GetPolicy().GetPositionStart(), planBound(plan).Length); err != nil {
		return nil, err
	}
	return &consumer{
		ds: d, open: open, cfg: cfg, plan: plan,
		start: &gloadpb.ResumeState{
			Fingerprint: d.info.Fingerprint, Seed: open.Seed, Epoch: open.Epoch,
			PolicyHash: rhash, Consumed: consumed, PlanWorld: uint32(planWorld),
		},
		rank: int(open.Rank), world: world, worker: int(open.Worker), workers: workers,
		assigned: assigned, padID: padID(open.Policy, d.info),
	}, nil
}

// checkShapes refuses plans whose largest batch exceeds MaxBatchBytes.
func (s *Server) checkShapes(p epochPlan, cfg bucket.Config) error {
	per := int64(4)
	if cfg.Policy == bucket.Packed {
		per = 8 // input_ids and position_ids
	}
	bounds := p.Shapes()
	if _, lazy := p.(interface{ Bound() bucket.Bound }); lazy {
		// A lazy plan lists its first window's shapes; every batch is within its bound.
		b := planBound(p)
		bounds = append(bounds, bucket.Shape{Rows: b.Rows, Length: b.Length})
	}
	tokenCap := int64(math.MaxInt64)
	if cfg.Policy == bucket.Tokens {
		tokenCap = int64(cfg.TokenBudget)
	}
	for _, sh := range bounds {
		// input_ids (+ position_ids), plus at worst one index entry and one
		// length per row.
		n := min(int64(sh.Rows)*int64(sh.Length), tokenCap)*per + int64(sh.Rows)*12
		if n > s.cfg.MaxBatchBytes {
			return status.Errorf(codes.InvalidArgument,
				"policy.batch_size: batches of %d×%d tokens need %d bytes, more than this server's limit of %d "+
					"(--max-batch-bytes; the client holds several times that once it widens the keys to int64): "+
					"rows of up to %d tokens are in this plan; leave them out with max_length (the Loader's, "+
					"policy.max_length), cut them when tokenizing (--max-length with --overflow split), or ask for "+
					"a smaller batch_size",
				sh.Rows, sh.Length, n, s.cfg.MaxBatchBytes, sh.Length)
		}
	}
	return nil
}

// checkPositions refuses a position_start whose position ids (start up to
// start + row length - 1, as int32) would wrap past 2^31-1 in the plan's
// longest rows.
func checkPositions(start int32, longest int) error {
	if longest > 0 && int64(start)+int64(longest)-1 > math.MaxInt32 {
		return status.Errorf(codes.InvalidArgument,
			"policy.position_start: %d would make position ids of %d-token rows exceed int32 (%d); want at most %d",
			start, longest, math.MaxInt32, math.MaxInt32-longest+1)
	}
	return nil
}

// topLevel are bucket's field names that are Open fields, not policy fields.
var topLevel = map[string]bool{"start": true, "world_size": true, "rank": true, "num_workers": true, "worker": true, "epoch": true}

// planStatus maps a bucket error to a gRPC status naming the field.
func planStatus(err error) error {
	var ce *bucket.ConfigError
	switch {
	case errors.As(err, &ce):
		field := ce.Field
		switch {
		case field == "start":
			field = "resume.consumed"
		case field == "plan_world":
			field = "world_size"
		case !topLevel[field]:
			field = "policy." + field
		}
		return status.Errorf(codes.InvalidArgument, "%s: %s", field, ce.Msg)
	case errors.Is(err, bucket.ErrTokenBudget):
		return status.Errorf(codes.InvalidArgument, "policy.token_budget: %s", strings.TrimPrefix(err.Error(), "bucket: "))
	case errors.Is(err, bucket.ErrTooLarge):
		return status.Errorf(codes.ResourceExhausted, "plan: %v", err)
	}
	return status.Errorf(codes.Internal, "plan: %v", err)
}

// describe is a short description of a consumer for logs and errors.
func (c *consumer) describe() string {
	return fmt.Sprintf("dataset %s rank %d/%d worker %d/%d", c.ds.name, c.rank, c.world, c.worker, c.workers)
}
