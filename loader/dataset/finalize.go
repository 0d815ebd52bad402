package dataset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/gload/gload/internal/safename"
)

// Names of the Hugging Face files in a dataset directory.
const (
	StateFile = "state.json"
	InfoFile  = "dataset_info.json"
)

// Finalize turns complete shards into a dataset: it renames shards[i] to
// DataFileName(i, len(shards)), then writes dataset_info.json, gload.index
// (and the freshness stamp) and, last, state.json, each through a temporary
// file, fsync and rename. The rename of state.json is the commit point (see
// the package comment): a directory holding state.json is complete.
//
// Finalize is idempotent: after a crash at any point it can be run again with
// the same shards (or with those RecoverShards returns). A shard whose file is
// already under its final name is accepted as renamed. An old state.json, then
// an old gload.index, is removed first, so the directory does not look complete
// until the new state.json is in place.
//
// With no shards, Finalize writes one empty shard: Hugging Face cannot load a
// dataset with no data files.
func Finalize(dir string, shards []ShardInfo, opts WriterOptions) error {
	opts, err := opts.normalized()
	if err != nil {
		return fmt.Errorf("finalize %s: %w", dir, err)
	}
	for i := range shards {
		if err := shards[i].validate(); err != nil {
			return fmt.Errorf("finalize %s: shard %d: %w", dir, i, err)
		}
	}
	if len(shards) == 0 {
		w, err := CreateShard(dir, 0, opts)
		if err != nil {
			return fmt.Errorf("finalize %s: %w", dir, err)
		}
		info, err := w.Close()
		if err != nil {
			return fmt.Errorf("finalize %s: %w", dir, err)
		}
		shards = []ShardInfo{info}
	}
	for _, name := range []string{StateFile, IndexFile} { // the commit point first
		if err := removeQuiet(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("finalize %s: %w", dir, err)
		}
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("finalize %s: %w", dir, err)
	}
	n := len(shards)
	final := make([]ShardInfo, n)
	for i, s := range shards {
		name := DataFileName(i, n)
		src, dst := filepath.Join(dir, s.Name), filepath.Join(dir, name)
		if s.Name != name {
			err := os.Rename(src, dst)
			if errors.Is(err, os.ErrNotExist) {
				// Renamed by an earlier, interrupted run?
				if st, serr := safename.LstatRegular(dst); serr == nil && st.Size() == s.Bytes {
					err = nil
				}
			}
			if err != nil {
				return fmt.Errorf("finalize %s: rename shard %s to %s: %w", dir, s.Name, name, err)
			}
		}
		final[i] = s
		final[i].Name = name
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("finalize %s: %w", dir, err)
	}
	if err := testCrash("renamed"); err != nil {
		return err
	}
	ix := &Index{TokenizerHash: opts.TokenizerHash}
	var total int64
	for _, s := range final {
		total += s.Rows
	}
	ix.Lengths = make([]uint32, 0, total)
	for _, s := range final {
		e, err := statShard(dir, s)
		if err != nil {
			return fmt.Errorf("finalize %s: %w", dir, err)
		}
		ix.Shards = append(ix.Shards, e)
		ix.Lengths = append(ix.Lengths, s.Lengths...)
	}
	if err := writeFileAtomic(dir, InfoFile, []byte(datasetInfoJSON(opts.Columns, opts.Labels, opts.Special, opts.ChatTemplateDate))); err != nil {
		return fmt.Errorf("finalize %s: %w", dir, err)
	}
	if err := testCrash("info"); err != nil {
		return err
	}
	if err := WriteIndex(dir, ix); err != nil {
		return fmt.Errorf("finalize %s: %w", dir, err)
	}
	if err := testCrash("index"); err != nil {
		return err
	}
	// The shards were hashed as they were written: vouch for them as they are now.
	names := make([]string, len(final))
	for i, s := range final {
		names[i] = s.Name
	}
	if err := stampFiles(dir, ix.checksum, names); err != nil {
		return fmt.Errorf("finalize %s: %w", dir, err)
	}
	if err := testCrash("stamp"); err != nil {
		return err
	}
	// The commit point: from this rename on, the directory is a complete dataset for every reader.
	if err := writeFileAtomic(dir, StateFile, []byte(stateJSON(final, opts))); err != nil {
		return fmt.Errorf("finalize %s: %w", dir, err)
	}
	return nil
}

// testHookFinalize, set only by tests, runs at each step of Finalize ("renamed", "info", "index", "stamp"); an
// error stands for a crash there.
var testHookFinalize func(step string) error

func testCrash(step string) error {
	if testHookFinalize != nil {
		return testHookFinalize(step)
	}
	return nil
}

// validate checks that a ShardInfo is self-consistent.
func (s *ShardInfo) validate() error {
	if err := checkFileName(s.Name); err != nil {
		return err
	}
	if int64(len(s.Lengths)) != s.Rows {
		return fmt.Errorf("%w: %s: %d lengths for %d rows", ErrBadInput, s.Name, len(s.Lengths), s.Rows)
	}
	var tokens int64
	for _, l := range s.Lengths {
		tokens += int64(l)
	}
	if tokens != s.Tokens {
		return fmt.Errorf("%w: %s: lengths sum to %d, Tokens is %d", ErrBadInput, s.Name, tokens, s.Tokens)
	}
	e := ShardEntry{Name: s.Name, Size: s.Bytes, Rows: s.Rows, Tokens: s.Tokens, Batches: s.Batches}
	ix := Index{Shards: []ShardEntry{e}, Lengths: s.Lengths}
	if err := ix.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	return nil
}

// statShard builds the index entry of a finalized shard from the file on disk.
func statShard(dir string, s ShardInfo) (ShardEntry, error) {
	path := filepath.Join(dir, s.Name)
	f, st, err := safename.OpenRegular(path)
	if err != nil {
		return ShardEntry{}, fmt.Errorf("open shard %s: %w", path, err)
	}
	defer f.Close()
	if st.Size() != s.Bytes {
		return ShardEntry{}, fmt.Errorf("shard %s: %w: %d bytes on disk, %d written", path, ErrCorrupt, st.Size(), s.Bytes)
	}
	return ShardEntry{
		Name: s.Name, Size: st.Size(), ContentHash: s.Hash, Rows: s.Rows, Tokens: s.Tokens, Batches: s.Batches,
	}, nil
}

var (
	shardNameRE = regexp.MustCompile(`^shard-([0-9]{5,})\.arrow$`)
	dataNameRE  = regexp.MustCompile(`^data-([0-9]{5,})-of-([0-9]{5,})\.arrow$`)
)

// RecoverShards lists the complete shards in dir for a Finalize re-run after
// the caller lost its ShardInfos (e.g. the process crashed mid-Finalize):
// already renamed data files first, by index, then shard-NNNNN.arrow files by
// number. It reads every listed file in full. Temporary "*.tmp" files are
// incomplete and ignored.
func RecoverShards(dir string) ([]ShardInfo, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("recover shards in %s: %w", dir, err)
	}
	type cand struct {
		data bool
		num  int
		name string
	}
	var cands []cand
	total := -1
	for _, e := range ents {
		if m := dataNameRE.FindStringSubmatch(e.Name()); m != nil {
			i, _ := strconv.Atoi(m[1])
			n, _ := strconv.Atoi(m[2])
			if total >= 0 && n != total {
				return nil, fmt.Errorf("recover shards in %s: data files of different datasets (of %d and of %d)", dir, total, n)
			}
			total = n
			cands = append(cands, cand{true, i, e.Name()})
		} else if m := shardNameRE.FindStringSubmatch(e.Name()); m != nil {
			i, _ := strconv.Atoi(m[1])
			cands = append(cands, cand{false, i, e.Name()})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if a.data != b.data {
			if a.data {
				return -1
			}
			return 1
		}
		return a.num - b.num
	})
	if total >= 0 && len(cands) != total {
		return nil, fmt.Errorf("recover shards in %s: %d shard files, data files say %d", dir, len(cands), total)
	}
	out := make([]ShardInfo, 0, len(cands))
	for _, c := range cands {
		info, err := ScanShard(filepath.Join(dir, c.name))
		if err != nil {
			return nil, fmt.Errorf("recover shards in %s: %w", dir, err)
		}
		out = append(out, info)
	}
	return out, nil
}

// ScanShard reads a complete shard file and returns its ShardInfo (name,
// rows, lengths, batch table and content hash), checking it on the way.
func ScanShard(path string) (ShardInfo, error) {
	dir, name := filepath.Split(path)
	sh, err := openShard(dir, name)
	if err != nil {
		return ShardInfo{}, fmt.Errorf("scan shard: %w", err)
	}
	defer sh.close()
	e, lengths, err := sh.scan(nil)
	if err != nil {
		return ShardInfo{}, fmt.Errorf("scan shard: %w", err)
	}
	return ShardInfo{
		Name: name, Rows: e.Rows, Tokens: e.Tokens, Bytes: sh.size,
		Hash: e.ContentHash, Lengths: lengths, Batches: e.Batches,
	}, nil
}

// writeFileAtomic writes the parts, in order, as dir/name through a temporary file, fsync and rename,
// then fsyncs the directory. The temporary file is removed on failure.
func writeFileAtomic(dir, name string, parts ...[]byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := safename.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	for _, b := range parts {
		if err == nil {
			_, err = f.Write(b)
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", path, err), removeQuiet(tmp))
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so that renames in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// ---- Hugging Face JSON ----
//
// Hugging Face writes these files with Python's json module; they are produced
// here byte for byte the same way (ensure_ascii escaping, ", " and ": "
// separators, indent 2 in the .json files), with fixed key order.

type jsonKV struct {
	k string
	v any // string, nil, bool, jsonObj, []any
}

type jsonObj []jsonKV

// jsonNumber is a number, written as it is.
type jsonNumber string

// featuresJSON writes list columns in the Sequence form (datasets 2.x and
// 3.x write it, 4.x and later still read it as List); the 4.x "List" form is
// unknown to datasets before 4 ("Feature type 'List' not found").
func featuresJSON(columns []string, labels bool) jsonObj {
	seq := jsonObj{
		{"feature", jsonObj{{"dtype", "int32"}, {"_type", "Value"}}},
		{"length", jsonNumber("-1")},
		{"_type", "Sequence"},
	}
	f := jsonObj{{"input_ids", seq}}
	if labels {
		f = append(f, jsonKV{"labels", seq})
	}
	for _, c := range columns {
		f = append(f, jsonKV{c, jsonObj{{"dtype", "string"}, {"_type", "Value"}}})
	}
	return f
}

// hfSchemaMetadata is the value of the "huggingface" Arrow schema metadata key.
func hfSchemaMetadata(columns []string, labels bool) string {
	return pyJSON(jsonObj{{"info", jsonObj{{"features", featuresJSON(columns, labels)}}}}, 0)
}

func datasetInfoJSON(columns []string, labels bool, special SpecialTokens, chatDate string) string {
	info := jsonObj{
		{"citation", ""},
		{"description", ""},
		{"features", featuresJSON(columns, labels)},
	}
	var g jsonObj
	if special.Known() {
		g = special.json()
	}
	if chatDate != "" {
		g = append(g, jsonKV{"chat_template_date", chatDate})
	}
	if g != nil {
		info = append(info, jsonKV{"gload", g})
	}
	info = append(info, jsonKV{"homepage", ""}, jsonKV{"license", ""})
	return pyJSON(info, 2)
}

func stateJSON(shards []ShardInfo, opts WriterOptions) string {
	files := make([]any, len(shards))
	for i, s := range shards {
		files[i] = jsonObj{{"filename", s.Name}}
	}
	return pyJSON(jsonObj{
		{"_data_files", files},
		{"_fingerprint", fmt.Sprintf("%016x", contentFingerprint(shards, opts))},
		{"_format_columns", nil},
		{"_format_kwargs", jsonObj{}},
		{"_format_type", nil},
		{"_output_all_columns", false},
		{"_split", nil},
	}, 2)
}

// contentFingerprint is the state.json fingerprint: it depends only on the
// shards' content and the options, never on time.
func contentFingerprint(shards []ShardInfo, opts WriterOptions) uint64 {
	h := fnv.New64a()
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	str := func(s string) {
		put(uint64(len(s)))
		io.WriteString(h, s)
	}
	str("gload-state-v2")
	str(opts.TokenizerHash)
	put(uint64(len(opts.Columns)))
	for _, c := range opts.Columns {
		str(c)
	}
	for _, s := range shards {
		str(s.Name)
		put(uint64(s.Bytes))
		h.Write(s.Hash[:])
	}
	return h.Sum64()
}

// pyJSON renders v as Python's json.dumps(v, indent=indent) would (indent 0:
// json.dumps(v) on one line).
func pyJSON(v any, indent int) string {
	var sb strings.Builder
	writePyJSON(&sb, v, indent, 0)
	return sb.String()
}

func writePyJSON(sb *strings.Builder, v any, indent, depth int) {
	newline := func(d int) {
		if indent > 0 {
			sb.WriteByte('\n')
			sb.WriteString(strings.Repeat(" ", indent*d))
		}
	}
	sep := ", "
	if indent > 0 {
		sep = ","
	}
	switch x := v.(type) {
	case nil:
		sb.WriteString("null")
	case bool:
		sb.WriteString(strconv.FormatBool(x))
	case jsonNumber:
		sb.WriteString(string(x))
	case string:
		writePyString(sb, x)
	case jsonObj:
		if len(x) == 0 {
			sb.WriteString("{}")
			return
		}
		sb.WriteByte('{')
		for i, kv := range x {
			if i > 0 {
				sb.WriteString(sep)
			}
			newline(depth + 1)
			writePyString(sb, kv.k)
			sb.WriteString(": ")
			writePyJSON(sb, kv.v, indent, depth+1)
		}
		newline(depth)
		sb.WriteByte('}')
	case []any:
		if len(x) == 0 {
			sb.WriteString("[]")
			return
		}
		sb.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				sb.WriteString(sep)
			}
			newline(depth + 1)
			writePyJSON(sb, e, indent, depth+1)
		}
		newline(depth)
		sb.WriteByte(']')
	default:
		panic(fmt.Sprintf("dataset: pyJSON: unexpected %T", v)) // internal invariant
	}
}

// writePyString writes s as a JSON string with Python's ensure_ascii escaping.
func writePyString(sb *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	u := func(r rune) {
		sb.WriteString(`\u`)
		for sh := 12; sh >= 0; sh -= 4 {
			sb.WriteByte(hex[(r>>sh)&0xf])
		}
	}
	sb.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			sb.WriteString(`\"`)
		case r == '\\':
			sb.WriteString(`\\`)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == '\b':
			sb.WriteString(`\b`)
		case r == '\f':
			sb.WriteString(`\f`)
		case r < 0x20:
			u(r)
		case r < 0x80:
			sb.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			u(r1)
			u(r2)
		default:
			u(r)
		}
	}
	sb.WriteByte('"')
}
