package loader

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/loader/shm"
)

// The doorbell hand-off (Open.shm_doorbell): batches are announced in the
// ring's control region and slots come back through the client's released
// word, so a stream carries no message per batch. This file holds the server's
// half of the return path; stream.go publishes.

// Waiting for the released word: a short spin, then futex sleeps whose
// timeout doubles up to releasePollMax (so that a client which does not wake
// the server, an older one, is still seen, and the stream's context is looked
// at between sleeps). The client wakes the server once half the ring has come
// back (see shm/futex.go): the other half is still ready for it, and the
// server refills slots in groups rather than one wake-up per batch.
const (
	releaseSpin    = 64
	releasePollMin = 10 * time.Microsecond
	releasePollMax = 500 * time.Microsecond
)

// watchReleases turns advances of bell's released word into acks on cr (in
// stream order: batch s is in slot s mod slots) until ctx ends or all total
// batches are back. A word that goes backwards or past the batches published
// fails the stream.
func watchReleases(ctx context.Context, bell *shm.Doorbell, cr *credits, total int) error {
	slots := uint64(bell.Slots())
	var next uint64
	idle, pause := 0, releasePollMin
	for next < uint64(total) {
		got := bell.Released()
		if got < next {
			return status.Errorf(codes.InvalidArgument, "shm doorbell: the released word went back from %d to %d", next, got)
		}
		if got == next {
			idle++
			if idle > releaseSpin {
				if ctx.Err() != nil {
					return nil
				}
				bell.WaitReleased(next, min(next+max(slots/2, 1), uint64(total)), pause)
				pause = min(2*pause, releasePollMax)
			}
			continue
		}
		for ; next < got; next++ {
			if err := cr.ack(next, int32(next%slots)); err != nil {
				return status.Errorf(codes.InvalidArgument, "shm doorbell: the released word says %d batches, but %v", got, status.Convert(err).Message())
			}
		}
		idle, pause = 0, releasePollMin
	}
	return nil
}
