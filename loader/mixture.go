package loader

// Mixtures (issue 13): a stream may read a weighted mixture of the datasets a
// server serves. A mixture is served like a dataset whose rows are its
// sources' rows one after another — source s's row r is row
// offsets[s] + r — so batch assembly, both transports and the wire Batch stay
// as they are; Opened.sources and Opened.source_offsets let a client turn an
// index entry back into (source, row). The plan is bucket.NewMixture's.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/proto/gloadpb"
)

// MixtureSpec is a mixture a server is started with (gload serve --mixture).
type MixtureSpec struct {
	Sources []MixtureWeight
	// MixBy is "samples" (default) or "tokens".
	MixBy string
	// EpochSamples, EpochTokens, EpochUntil: see bucket.MixConfig.
	EpochSamples, EpochTokens int64
	EpochUntil                string
	// AllowTokenizerMismatch mixes sources whose tokenizer hashes differ.
	AllowTokenizerMismatch bool
	// SingleSourceBatches makes every batch hold rows of one source.
	SingleSourceBatches bool
}

// MixtureWeight is one source of a MixtureSpec.
type MixtureWeight struct {
	Dataset string
	Weight  float64
}

// mixServed is what a served mixture holds beside its served record.
type mixServed struct {
	parts   []*served
	offsets []int // parts[s]'s rows start at offsets[s]; offsets[len(parts)] is the total
	sources []bucket.MixSource
	mc      bucket.MixConfig
}

// epochPlan is what a stream serves: a dataset's plan or a mixture's.
type epochPlan interface {
	Len() int
	Batch(g int) bucket.Batch
	// Shapes lists the plan's shapes: all of them for exact plans, the first window's for lazy ones (see
	// planBound for what every batch fits in).
	Shapes() []bucket.Shape
	Stats() bucket.Stats
}

var (
	_ epochPlan = (*bucket.Plan)(nil)
	_ epochPlan = (*bucket.LazyPlan)(nil)
	_ epochPlan = (*bucket.SeqPlan)(nil)
	_ epochPlan = (*bucket.LazyPacked)(nil)
	_ epochPlan = (*mixPlan)(nil)
)

// planBound is the largest batch of p: its own bound for plans that do not list every shape (lazy plans), else
// the bound of its shapes.
func planBound(p epochPlan) bucket.Bound {
	if b, ok := p.(interface{ Bound() bucket.Bound }); ok {
		return b.Bound()
	}
	return bucket.BoundOf(p.Shapes())
}

// mixPlan is a mixture's plan with piece indices in the mixture's row space.
type mixPlan struct {
	bucket.MixturePlan
	offsets []int
}

// Hash is a lazy mixture's own (O(windows)); an exact mixture's is bucket.HashBatches over its batches in the
// mixture's row space, as before lazy mixtures.
func (p *mixPlan) Hash() string {
	if lm, ok := p.MixturePlan.(*bucket.LazyMixture); ok {
		return lm.Hash()
	}
	return bucket.HashBatches(p.Len(), p.Batch)
}

// Algorithm is the lazy mixture's planner name; "" for exact mixtures.
func (p *mixPlan) Algorithm() string {
	if a, ok := p.MixturePlan.(interface{ Algorithm() string }); ok {
		return a.Algorithm()
	}
	return ""
}

// Batch returns batch g with Index = offsets[Source] + row.
func (p *mixPlan) Batch(g int) bucket.Batch {
	b := p.MixturePlan.Batch(g)
	for k := range b.Pieces {
		b.Pieces[k].Index += p.offsets[b.Pieces[k].Source]
	}
	return b
}

// locate maps a mixture row to its source and the row within it.
func (m *mixServed) locate(i int) (int, int) {
	s := sort.Search(len(m.parts), func(s int) bool { return m.offsets[s+1] > i })
	if s >= len(m.parts) {
		s = len(m.parts) - 1
	}
	return s, i - m.offsets[s]
}

// mixData reads a mixture's rows from its sources (a tokenSource).
type mixData struct{ m *mixServed }

func (d mixData) ZeroCopy() bool {
	for _, p := range d.m.parts {
		if !p.ds.ZeroCopy() {
			return false
		}
	}
	return true
}

func (d mixData) Tokens(i int) ([]int32, error) {
	s, r := d.m.locate(i)
	return d.m.parts[s].ds.Tokens(r)
}

func (d mixData) AppendTokens(dst []int32, i int) ([]int32, error) {
	s, r := d.m.locate(i)
	return d.m.parts[s].ds.AppendTokens(dst, r)
}

// HasLabels: a mixture serves labels when every source stores them.
func (d mixData) HasLabels() bool {
	for _, p := range d.m.parts {
		if !p.ds.HasLabels() {
			return false
		}
	}
	return len(d.m.parts) > 0
}

func (d mixData) Labels(i int) ([]int32, error) {
	s, r := d.m.locate(i)
	return d.m.parts[s].ds.Labels(r)
}

func (d mixData) AppendLabels(dst []int32, i int) ([]int32, error) {
	s, r := d.m.locate(i)
	return d.m.parts[s].ds.AppendLabels(dst, r)
}

// tokens is what batch assembly reads this target's rows from.
func (d *served) tokens() tokenSource {
	if d.mix != nil {
		return mixData{d.mix}
	}
	return d.ds
}

// newMixture builds the served record of a mixture of the server's datasets.
// Its errors are gRPC statuses naming the field (field is "mixture" for a
// server-side spec, "open.mixture" for one a client sent).
func (s *Server) newMixture(name string, spec MixtureSpec, field string) (*served, error) {
	if len(spec.Sources) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "%s: mixture %q has no sources", field, name)
	}
	m := &mixServed{offsets: []int{0}}
	m.mc = bucket.MixConfig{MixBy: bucket.MixBy(spec.MixBy), EpochSamples: spec.EpochSamples, EpochTokens: spec.EpochTokens, EpochUntil: spec.EpochUntil,
		SingleSourceBatches: spec.SingleSourceBatches}
	var rows, tokens uint64
	var maxLen uint32
	info := &gloadpb.DatasetInfo{Name: name, MixBy: string(m.mc.MixBy)}
	for i, w := range spec.Sources {
		d, ok := s.lookupDataset(w.Dataset)
		if !ok {
			return nil, status.Errorf(codes.NotFound, "%s[%d]: dataset %q is not served here; this server serves: %s",
				field, i, w.Dataset, strings.Join(s.names, ", "))
		}
		if d.cache != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%s[%d]: dataset %q is in object storage; mixtures read local datasets only", field, i, w.Dataset)
		}
		if len(m.parts) > 0 && !spec.AllowTokenizerMismatch {
			first := m.parts[0]
			if d.info.TokenizerHash != first.info.TokenizerHash {
				return nil, status.Errorf(codes.FailedPrecondition,
					"%s: sources %q (tokenizer %s) and %q (tokenizer %s) were tokenized differently; mix them anyway with allow_tokenizer_mismatch",
					field, first.name, first.info.TokenizerHash, d.name, d.info.TokenizerHash)
			}
		}
		m.parts = append(m.parts, d)
		m.offsets = append(m.offsets, m.offsets[len(m.offsets)-1]+d.ds.Len())
		m.sources = append(m.sources, bucket.MixSource{Name: w.Dataset, Fingerprint: d.info.Fingerprint, Lengths: d.ds.LengthSource(),
			Weight: w.Weight, MaxLength: max(d.info.MaxLength, 1)})
		info.Mixture = append(info.Mixture, &gloadpb.MixtureSource{Dataset: w.Dataset, Weight: w.Weight})
		rows += d.info.Rows
		tokens += d.info.Tokens
		maxLen = max(maxLen, d.info.MaxLength)
	}
	// What planning may hold and walk: --max-mixture-rows, or all the
	// sources' rows when they are more (the default epoch always fits).
	m.mc.MaxRows = max(s.cfg.MaxMixtureRows, int64(m.offsets[len(m.offsets)-1]))
	fp, err := bucket.MixSourcesFingerprint(m.sources, m.mc)
	if err != nil {
		return nil, mixStatus(field, err, s.cfg.MaxMixtureRows)
	}
	first := m.parts[0].info
	info.Rows, info.Tokens, info.MaxLength, info.Fingerprint = rows, tokens, maxLen, fp
	info.TokenizerHash, info.PadId, info.PadToken, info.PadFrom = first.TokenizerHash, first.PadId, first.PadToken, first.PadFrom
	return &served{name: name, info: info, mix: m}, nil
}

// mixStatus maps a bucket mixture error to a gRPC status naming the field
// (and, for a plan too large, the server's limit maxMixRows).
func mixStatus(field string, err error, maxMixRows int64) error {
	var ce *bucket.ConfigError
	if errors.As(err, &ce) {
		switch ce.Field {
		case "mixture":
			return status.Errorf(codes.InvalidArgument, "%s: %s", field, ce.Msg)
		case "mix_by", "epoch_samples", "epoch_tokens", "epoch_until", "single_source_batches":
			return status.Errorf(codes.InvalidArgument, "%s.%s: %s", field, ce.Field, ce.Msg)
		}
	}
	if errors.Is(err, bucket.ErrTooLarge) {
		return status.Errorf(codes.ResourceExhausted, "%s: %v (this server's --max-mixture-rows is %d; its sources' rows together may raise it)",
			field, err, maxMixRows)
	}
	return planStatus(err)
}

// mixTarget returns the mixture an Open asks for: the one it lists, or nil
// when it lists none.
func (s *Server) mixTarget(open *gloadpb.Open) (*served, error) {
	if len(open.Mixture) == 0 {
		if open.MixBy != "" || open.EpochSamples != 0 || open.EpochTokens != 0 || open.EpochUntil != "" || open.AllowTokenizerMismatch || open.SingleSourceBatches {
			if _, ok := s.mixtures[open.Dataset]; !ok {
				return nil, status.Error(codes.InvalidArgument, "open.mix_by/epoch_*: only for mixtures (open.mixture is empty)")
			}
			return nil, status.Errorf(codes.InvalidArgument, "open.mix_by/epoch_*: mixture %q is defined by the server; its settings cannot be changed here", open.Dataset)
		}
		return nil, nil
	}
	spec := MixtureSpec{MixBy: open.MixBy, EpochSamples: int64(min(open.EpochSamples, math.MaxInt64)),
		EpochTokens: int64(min(open.EpochTokens, math.MaxInt64)), EpochUntil: open.EpochUntil, AllowTokenizerMismatch: open.AllowTokenizerMismatch,
		SingleSourceBatches: open.SingleSourceBatches}
	names := make([]string, 0, len(open.Mixture))
	for _, w := range open.Mixture {
		spec.Sources = append(spec.Sources, MixtureWeight{Dataset: w.Dataset, Weight: w.Weight})
		names = append(names, fmt.Sprintf("%s:%g", w.Dataset, w.Weight))
	}
	name := open.Dataset
	if name == "" || !datasetName.MatchString(name) {
		h := sha256.Sum256([]byte(strings.Join(names, ",")))
		name = "mix-" + hex.EncodeToString(h[:4])
	}
	return s.newMixture(name, spec, "open.mixture")
}

// wireShares describes a mixture plan's sources.
func wireShares(p epochPlan) []*gloadpb.MixtureShare {
	mp, ok := p.(*mixPlan)
	if !ok {
		return nil
	}
	var out []*gloadpb.MixtureShare
	for _, sh := range mp.Shares() {
		out = append(out, &gloadpb.MixtureShare{Source: sh.Name, Weight: sh.Weight, Rows: uint64(sh.Rows), Tokens: uint64(sh.Tokens), Start: uint64(sh.Start)})
	}
	return out
}

// sourceNames and sourceOffsets are Opened's mixture fields.
func (d *served) sourceNames() []string {
	if d.mix == nil {
		return nil
	}
	out := make([]string, len(d.mix.parts))
	for i, p := range d.mix.parts {
		out[i] = p.name
	}
	return out
}

func (d *served) sourceOffsets() []uint64 {
	if d.mix == nil {
		return nil
	}
	out := make([]uint64, len(d.mix.parts))
	for i := range d.mix.parts {
		out[i] = uint64(d.mix.offsets[i])
	}
	return out
}

// mixCounter counts one stream's delivered rows and tokens per source.
type mixCounter struct {
	rows, tokens []interface{ Add(float64) }
}

func (s *Server) newMixCounter(d *served) *mixCounter {
	if d.mix == nil {
		return nil
	}
	c := &mixCounter{}
	for _, p := range d.mix.parts {
		c.rows = append(c.rows, s.metrics.mixRows.WithLabelValues(d.name, p.name))
		c.tokens = append(c.tokens, s.metrics.mixTokens.WithLabelValues(d.name, p.name))
	}
	return c
}

// count adds batch b's pieces (of a mixPlan) to the counters.
func (c *mixCounter) count(m *mixServed, b bucket.Batch) {
	if c == nil {
		return
	}
	rows := make([]int, len(c.rows))
	tokens := make([]int, len(c.rows))
	for _, p := range b.Pieces {
		s, _ := m.locate(p.Index)
		rows[s]++
		tokens[s] += p.Len
	}
	for s := range rows {
		if rows[s] > 0 {
			c.rows[s].Add(float64(rows[s]))
			c.tokens[s].Add(float64(tokens[s]))
		}
	}
}

// sortedMixtureNames lists a config's mixtures by name.
func sortedMixtureNames(m map[string]MixtureSpec) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// sortedNamesOf lists a map's names in order.
func sortedNamesOf(m map[string]*served) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
