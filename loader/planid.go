package loader

import (
	"github.com/gload/gload/bucket"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
)

// PlanIdentity is what a launcher compares across nodes before step 0: the
// dataset's content fingerprint and the hash of one epoch's global plan.
type PlanIdentity struct {
	Fingerprint string
	PlanHash    string
	Batches     int // global batches in the plan
}

// EpochPlanIdentity computes, without a server, the plan a server computes for
// ds under policy at (seed, epoch) laid out for planWorld ranks (the world
// size of the job's first Open; a resume keeps it): the same fingerprint and
// plan hash the Plan RPC reports. `gload inspect --plan` prints it.
func EpochPlanIdentity(ds *dataset.Dataset, policy *gloadpb.BatchPolicy, seed uint64, epoch, planWorld int) (PlanIdentity, error) {
	p, err := EpochPlan(ds, policy, seed, epoch, planWorld)
	if err != nil {
		return PlanIdentity{}, err
	}
	return PlanIdentity{Fingerprint: ds.Fingerprint(), PlanHash: p.Hash(), Batches: p.Len()}, nil
}

// EpochPlan is the plan a server computes for ds under policy at (seed, epoch) for planWorld ranks, computed
// here (exact or lazy, as the server chooses). Its errors are gRPC statuses, as the server's.
func EpochPlan(ds *dataset.Dataset, policy *gloadpb.BatchPolicy, seed uint64, epoch, planWorld int) (bucket.EpochPlan, error) {
	cfg := policyConfig(policy, max(planWorld, 1))
	lengths := ds.LengthSource()
	p, err := bucket.NewEpochPlan(lengths, ds.Fingerprint(), seed, epoch, cfg, bucket.Parallel)
	if err == nil {
		err = lengths.Err()
	}
	if err != nil {
		return nil, planStatus(err)
	}
	return p, nil
}
