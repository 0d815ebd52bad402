package loader

import (
	"errors"
	"io"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/proto/gloadpb"
)

// maxClientIDBytes bounds the client_id of the Report RPC.
const maxClientIDBytes = 1024

// Report takes the step timings of a training loop that does not pull its
// batches from this server (a baseline DataLoader, say): the first message
// names the client, every step goes into the GPU watch as a batch stream's
// step reports do. The client ends the stream when it is done; the server
// answers with the number of steps received. Like any client, a reporter
// that stops reporting ages out of the watch's window.
//
// Reporters appear in Clients with an empty dataset and no stream.
func (s *Server) Report(stream gloadpb.Loader_ReportServer) error {
	if s.draining.Load() {
		return status.Error(codes.Unavailable, "server is shutting down")
	}
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return status.Error(codes.InvalidArgument, "client_id: the stream closed before its first message")
	}
	if err != nil {
		return err
	}
	id := first.GetClientId()
	switch {
	case id == "":
		return status.Error(codes.InvalidArgument, "client_id: required in the first message of a report stream")
	case len(id) > maxClientIDBytes || !utf8.ValidString(id):
		return status.Errorf(codes.InvalidArgument, "client_id: want 1 to %d bytes of UTF-8, got %d bytes", maxClientIDBytes, len(id))
	}
	key := clientKey{id: id}
	defer s.clients.forgetIdle()
	label := s.metrics.labels.acquire(id) // the watch's per-client series need one
	defer s.metrics.labels.release(label)
	s.log.Info("report stream opened", "client", id)

	msgs := make(chan *gloadpb.ClientReport)
	recvErr := make(chan error, 1)
	ctx := stream.Context()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				recvErr <- ctx.Err()
				return
			}
		}
	}()
	var steps uint64
	record := func(m *gloadpb.ClientReport) error {
		if other := m.GetClientId(); other != "" && other != id {
			return status.Errorf(codes.InvalidArgument, "client_id: %q after %q: one report stream is one client", other, id)
		}
		r := m.GetStep()
		if r == nil {
			return nil // a message without a step (a keep-alive, or the opening one)
		}
		var ct time.Time
		if us := r.GetClientTimeUnixUs(); us != 0 {
			ct = time.UnixMicro(us)
		}
		s.clients.report(key, usDuration(r.GetWaitUs()), usDuration(r.GetStepUs()), ct, int(r.GetSteps()))
		steps++
		return nil
	}
	if err := record(first); err != nil {
		return err
	}
	for {
		select {
		case m := <-msgs:
			if err := record(m); err != nil {
				return err
			}
		case err := <-recvErr:
			if !errors.Is(err, io.EOF) {
				return err
			}
			s.log.Info("report stream closed", "client", id, "steps", steps)
			return stream.SendAndClose(&gloadpb.ReportSummary{Steps: steps})
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.watch.stop:
			return status.Error(codes.Unavailable, "server is shutting down")
		}
	}
}

// maxReportUS bounds a reported wait or step (about 12 days): larger values
// are nonsense, and would overflow a time.Duration.
const maxReportUS = 1 << 40

// usDuration converts reported microseconds, clamped to maxReportUS.
func usDuration(us uint64) time.Duration {
	return time.Duration(min(us, maxReportUS)) * time.Microsecond
}
