package loader

// This file holds the datasets a server opens by path at a client's request
// (the OpenPath RPC, used by a Python Loader given a dataset directory), and
// the count of client connections that lets a server started for one job
// exit when its clients are gone (Server.Idle).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/loader/objstore"
	"github.com/gload/gload/proto/gloadpb"
)

// MaxPathDatasets bounds the datasets one server opens by path: each holds
// its index and mappings until the server stops.
const MaxPathDatasets = 64

// maxPathLen bounds the path a client may send.
const maxPathLen = 4096

// pathRegistry holds the datasets opened through OpenPath, by name. A
// dataset is opened once per path, however many clients ask at once.
type pathRegistry struct {
	mu      sync.Mutex
	byName  map[string]*served
	opening map[string]*pathOpen // in progress, by name
	retired []*served            // replaced after their files changed; closed with the server
}

type pathOpen struct {
	done chan struct{}
	d    *served
	err  error
}

// pathName is the name a dataset opened by path is served under: its
// directory's base name (made a valid dataset name) and a hash of the whole
// path, so two directories never share a name and one path always gets the
// same one.
func pathName(path string) string {
	base := filepath.Base(strings.TrimRight(path, "/"))
	base = nameUnsafe.ReplaceAllString(base, "_")
	base = strings.TrimLeft(base, "._-")
	if len(base) > 40 {
		base = base[:40]
	}
	if base == "" {
		base = "dataset"
	}
	h := sha256.Sum256([]byte(path))
	return base + "-" + hex.EncodeToString(h[:6])
}

var nameUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// checkPath validates a path a client sent: an absolute, clean local path of
// a directory, or an object-storage URL.
func checkPath(p string) (string, error) {
	switch {
	case p == "":
		return "", status.Error(codes.InvalidArgument, "path: empty")
	case len(p) > maxPathLen:
		return "", status.Errorf(codes.InvalidArgument, "path: %d bytes, at most %d", len(p), maxPathLen)
	case strings.ContainsRune(p, 0):
		return "", status.Error(codes.InvalidArgument, "path: contains a NUL byte")
	}
	if objstore.IsURL(p) {
		return p, nil
	}
	if !filepath.IsAbs(p) {
		return "", status.Errorf(codes.InvalidArgument, "path %q: want an absolute path (the client resolves relative ones)", p)
	}
	p = filepath.Clean(p)
	fi, err := os.Stat(p)
	if err != nil {
		return "", status.Errorf(codes.NotFound, "path %s: %v", p, err)
	}
	if !fi.IsDir() {
		return "", status.Errorf(codes.InvalidArgument, "path %s: not a directory (a dataset is a directory written by gload tokenize or save_to_disk)", p)
	}
	return p, nil
}

// callerIsOwner refuses a call that did not come over a unix socket from a
// process of the server's own uid.
func callerIsOwner(ctx context.Context) error {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return status.Error(codes.PermissionDenied, "OpenPath: no peer information")
	}
	pa, ok := peerAddrOf(p.Addr)
	if !ok {
		return status.Error(codes.PermissionDenied, "OpenPath: only over the server's unix socket (datasets are opened by path for the server's own user)")
	}
	if int(pa.UID) != os.Getuid() {
		return status.Errorf(codes.PermissionDenied, "OpenPath: uid %d is not the server's uid %d", pa.UID, os.Getuid())
	}
	return nil
}

// OpenPath opens the dataset at a path (or object-storage URL), or finds it
// open already, and describes it; clients then name it in Open. Only the
// server's own uid may call it, over the unix socket.
func (s *Server) OpenPath(ctx context.Context, req *gloadpb.OpenPathRequest) (*gloadpb.OpenPathResponse, error) {
	if err := callerIsOwner(ctx); err != nil {
		s.log.Warn("open path refused", "err", err)
		return nil, err
	}
	if s.draining.Load() {
		return nil, status.Error(codes.Unavailable, "server is shutting down")
	}
	path, err := checkPath(req.GetPath())
	if err != nil {
		return nil, err
	}
	for _, n := range s.names {
		if d := s.datasets[n]; d.dir == path {
			return &gloadpb.OpenPathResponse{Dataset: d.info}, nil // started with it: served under its name
		}
	}
	d, opened, err := s.paths.open(pathName(path), func(name string) (*served, error) { return s.openDataset(name, path) })
	if err != nil {
		var st interface{ GRPCStatus() *status.Status }
		if errors.As(err, &st) {
			return nil, err
		}
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if opened {
		s.metrics.streams.WithLabelValues(d.name).Set(0)
		s.log.Info("dataset opened by path", "dataset", d.name, "path", path)
	}
	return &gloadpb.OpenPathResponse{Dataset: d.info, Opened: opened}, nil
}

// open returns the dataset called name, opening it with fn if it is not open
// (or was refused since because its files changed). Concurrent calls for one
// name wait for the first.
func (r *pathRegistry) open(name string, fn func(string) (*served, error)) (*served, bool, error) {
	r.mu.Lock()
	if r.byName == nil {
		r.byName, r.opening = map[string]*served{}, map[string]*pathOpen{}
	}
	if d, ok := r.byName[name]; ok {
		if d.check() == nil {
			r.mu.Unlock()
			return d, false, nil
		}
	}
	if op, ok := r.opening[name]; ok {
		r.mu.Unlock()
		<-op.done
		return op.d, false, op.err
	}
	if _, ok := r.byName[name]; !ok && len(r.byName) >= MaxPathDatasets {
		r.mu.Unlock()
		return nil, false, status.Errorf(codes.ResourceExhausted, "OpenPath: this server has %d datasets opened by path, the limit; start another server", MaxPathDatasets)
	}
	op := &pathOpen{done: make(chan struct{})}
	r.opening[name] = op
	r.mu.Unlock()

	op.d, op.err = fn(name)
	r.mu.Lock()
	delete(r.opening, name)
	if op.err == nil {
		if old, ok := r.byName[name]; ok && old != op.d {
			r.retired = append(r.retired, old)
		}
		r.byName[name] = op.d
	}
	r.mu.Unlock()
	close(op.done)
	return op.d, op.err == nil, op.err
}

// get returns the dataset opened by path under name.
func (r *pathRegistry) get(name string) (*served, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.byName[name]
	return d, ok
}

// all returns the datasets opened by path, sorted by name.
func (r *pathRegistry) all() []*served {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*served, 0, len(r.byName))
	for _, n := range sortedNamesOf(r.byName) {
		out = append(out, r.byName[n])
	}
	return out
}

// lookupDataset finds a dataset by name: one the server was started with,
// else one opened by path.
func (s *Server) lookupDataset(name string) (*served, bool) {
	if d, ok := s.datasets[name]; ok {
		return d, true
	}
	return s.paths.get(name)
}

// allServed returns the datasets the server was started with (in name order)
// and then those opened by path.
func (s *Server) allServed() []*served {
	out := make([]*served, 0, len(s.names))
	for _, n := range s.names {
		out = append(out, s.datasets[n])
	}
	return append(out, s.paths.all()...)
}

// pathInfos describes the datasets opened by path.
func (s *Server) pathInfos() []*gloadpb.DatasetInfo {
	var out []*gloadpb.DatasetInfo
	for _, d := range s.paths.all() {
		out = append(out, d.info)
	}
	return out
}

// closePaths closes the datasets opened by path (those the server was
// started with are closed with the rest).
func (s *Server) closePaths() error {
	r := &s.paths
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, d := range append(r.retired, mapValues(r.byName)...) {
		if d.ds != nil {
			if err := d.ds.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close dataset %s: %w", d.name, err))
			}
		}
		if d.cache != nil {
			errs = append(errs, d.cache.Close())
		}
	}
	return errors.Join(errs...)
}

func mapValues(m map[string]*served) []*served {
	out := make([]*served, 0, len(m))
	for _, d := range m {
		out = append(out, d)
	}
	return out
}

// connGauge is a stats.Handler counting open client connections and when
// the last one closed.
type connGauge struct {
	n    atomic.Int64
	last atomic.Int64 // unix nanoseconds of the last change to zero (or of the start)
}

var _ stats.Handler = (*connGauge)(nil)

func (g *connGauge) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (g *connGauge) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (g *connGauge) HandleRPC(context.Context, stats.RPCStats)                         {}
func (g *connGauge) HandleConn(_ context.Context, st stats.ConnStats) {
	switch st.(type) {
	case *stats.ConnBegin:
		g.n.Add(1)
	case *stats.ConnEnd:
		if g.n.Add(-1) == 0 {
			g.last.Store(time.Now().UnixNano())
		}
	}
}

// Idle returns the number of open client connections and, when there are
// none, since when (the server's start if there never was one).
func (s *Server) Idle() (conns int, since time.Time) {
	n := s.conns.n.Load()
	if n > 0 {
		return int(n), time.Time{}
	}
	last := s.conns.last.Load()
	if last == 0 {
		return 0, s.started
	}
	return 0, time.Unix(0, last)
}
