package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gload/gload/tokenize"
	"github.com/gload/gload/tokenize/chat"
	"github.com/gload/gload/tokenize/corpus"
	"github.com/gload/gload/tokenize/pipeline"
)

type tokenizeOptions struct {
	g            *globalOptions
	task         string
	splitSize    string
	tokenizer    string
	engine       string
	out          string
	format       string
	docPer       string
	textField    string
	keepColumns  []string
	addSpecial   bool
	splitSpecial bool
	appendEOS    bool
	eosToken     string
	padToken     string
	maxLength    int
	overflow     string
	minLength    int
	workers      int
	shardSize    string
	maxDocBytes  string
	overwrite    bool
	resume       bool
	strict       bool
	quiet        bool
	memoryLimit  string
	s3           s3Flags // --out s3://…
	stage        string
	chat         chatFlags // --format chat
	inflight     int
}

func newTokenizeCmd(g *globalOptions) *cobra.Command {
	o := &tokenizeOptions{g: g}
	cmd := &cobra.Command{
		Use:   "tokenize --tokenizer tokenizer.json --out DIR INPUT...",
		Short: "Tokenize corpora into a Hugging Face-compatible, memory-mapped Arrow dataset",
		Long: `Tokenizes every document of the inputs (files, directories, globs: JSONL/.json, optionally .gz or .zst;
text with --format text; Parquet; Hugging Face save_to_disk directories) on all cores and writes a dataset
directory that datasets.load_from_disk opens unchanged and gload serve serves.

Rows equal Hugging Face's encode(text, add_special_tokens=False).ids unless --add-special-tokens is given.
Output is byte-identical for any --workers. Bad documents (malformed JSON, missing or non-string text, empty,
too large) are skipped, counted and the first few printed with file:line; --strict stops at the first one.
A run that is killed leaves no complete-looking dataset; --resume continues after the last complete shard and
ends byte-identical to an uninterrupted run.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tokenizer, "tokenizer", "", "tokenizer.json (plain or .json.gz)")
	f.StringVar(&o.engine, "engine", "go", "tokenizer engine: go, or hf (binaries built with -tags hftokenizers)")
	f.StringVar(&o.out, "out", "", "output dataset directory")
	f.StringVar(&o.format, "format", "auto", "input format: auto (by extension), jsonl, text, parquet, hf; chat: JSON Lines conversations → input_ids + labels (assistant-only loss)")
	o.chat.add(f)
	f.StringVar(&o.docPer, "doc-per", "line", "with --format text: a document per line or per file")
	f.StringVar(&o.textField, "text-field", "text", "field/column holding the text (dotted path for nested JSON)")
	f.StringSliceVar(&o.keepColumns, "keep-columns", nil, "other fields to carry into the dataset as string columns")
	f.BoolVar(&o.addSpecial, "add-special-tokens", false, "apply the tokenizer's post-processor (e.g. BOS)")
	f.BoolVar(&o.splitSpecial, "split-special-tokens", false, "treat special-token text in documents as plain text")
	f.BoolVar(&o.appendEOS, "append-eos", false, "append the EOS token to every document")
	f.StringVar(&o.eosToken, "eos-token", "", "EOS token for --append-eos (default: eos_token of tokenizer_config.json beside the tokenizer)")
	f.StringVar(&o.padToken, "pad-token", "", "pad token recorded in the dataset for gload serve (default: pad_token, else eos_token, of tokenizer_config.json beside the tokenizer)")
	f.IntVar(&o.maxLength, "max-length", 0, "longest row in tokens (0: no limit); see --overflow")
	f.StringVar(&o.overflow, "overflow", "truncate", "documents above --max-length: truncate, split or drop")
	f.IntVar(&o.minLength, "min-length", 0, "skip rows shorter than this many tokens")
	f.IntVar(&o.workers, "workers", runtime.NumCPU(), "tokenizing goroutines")
	f.IntVar(&o.inflight, "inflight-chunks", 0, "chunks read but not yet written (0: 4 per worker)")
	_ = f.MarkHidden("inflight-chunks")
	f.StringVar(&o.shardSize, "shard-size", "500MB", "bytes per shard (e.g. 500MB, 2GiB)")
	f.StringVar(&o.maxDocBytes, "max-doc-bytes", "64MiB", "documents larger than this are skipped with a message")
	f.BoolVar(&o.overwrite, "overwrite", false, "replace an existing dataset in --out")
	f.BoolVar(&o.resume, "resume", false, "continue an interrupted run in --out")
	f.StringVar(&o.task, "task", "", "I/N: write only task I's share of the input files and pieces of large files (of N tasks; see --split-size) as a part for gload merge; "+
		"$SLURM_ARRAY_TASK_ID and $JOB_COMPLETION_INDEX work for I")
	f.StringVar(&o.splitSize, "split-size", "1GiB", "plain .jsonl/.txt files larger than this are read as pieces cut at the first line end "+
		"at or after each multiple of it: each piece starts a new shard and tasks of --task share them out (compressed files stay whole)")
	f.BoolVar(&o.strict, "strict", false, "stop at the first bad document (exit 1) instead of skipping it")
	f.BoolVar(&o.quiet, "quiet", false, "no progress output on stderr (the summary still goes to stdout)")
	f.StringVar(&o.memoryLimit, "memory-limit", "768MiB", "soft limit for the Go heap (GC works harder near it); 0 or $GOMEMLIMIT to leave as is")
	f.StringVar(&o.stage, "stage", "", "with --out s3://…: local directory the run writes before each shard is uploaded (default: under the user cache dir)")
	o.s3.add(f)
	_ = cmd.MarkFlagRequired("tokenizer")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func (o *tokenizeOptions) run(cmd *cobra.Command, inputs []string) error {
	taskIndex, taskCount, err := parseTask(o.task)
	if err != nil {
		return err
	}
	shardSize, err := parseSize(o.shardSize)
	if err != nil {
		return fmt.Errorf("--shard-size: %w", err)
	}
	maxDoc, err := parseSize(o.maxDocBytes)
	if err != nil {
		return fmt.Errorf("--max-doc-bytes: %w", err)
	}
	splitSize, err := parseSize(o.splitSize)
	if err != nil || splitSize <= 0 {
		return fmt.Errorf("--split-size %q: want a positive size (e.g. 1GiB)", o.splitSize)
	}
	if o.memoryLimit != "0" && os.Getenv("GOMEMLIMIT") == "" {
		limit, err := parseSize(o.memoryLimit)
		if err != nil {
			return fmt.Errorf("--memory-limit: %w", err)
		}
		debug.SetMemoryLimit(limit)
		// The heap is bounded by the limit, so the GC may let it grow further between cycles than GOGC=100
		// would: on 16 cores that GC was a main brake (issue 18: engine 245 -> 286 MB/s at GOGC=400).
		if os.Getenv("GOGC") == "" {
			debug.SetGCPercent(400)
		}
	}
	loadStart := time.Now()
	eng, err := tokenize.LoadEngine(o.engine, o.tokenizer, tokenize.Options{SplitSpecialTokens: o.splitSpecial})
	if err != nil {
		return err
	}
	times := runTimes{load: time.Since(loadStart)}
	log := o.g.logger()
	if t, ok := eng.(*tokenize.Tokenizer); ok {
		for _, w := range t.Warnings() {
			log.Warn(w)
		}
	}
	opts := pipeline.Options{
		TaskIndex: taskIndex, TaskCount: taskCount,
		Inputs: inputs,
		Out:    o.out,
		Corpus: corpus.Options{
			Format:      corpus.Format(o.format),
			DocPer:      corpus.DocPer(o.docPer),
			TextField:   o.textField,
			KeepColumns: o.keepColumns,
			MaxDocBytes: maxDoc,
			SplitBytes:  splitSize,
		},
		Engine:           eng,
		AddSpecialTokens: o.addSpecial,
		MaxLength:        o.maxLength,
		Overflow:         pipeline.Overflow(o.overflow),
		MinLength:        o.minLength,
		Workers:          o.workers,
		InflightChunks:   o.inflight,
		ShardSize:        shardSize,
		Overwrite:        o.overwrite,
		Resume:           o.resume,
		Strict:           o.strict,
		Logger:           log,
	}
	if o.format == "chat" {
		if err := o.chat.setup(o, eng, &opts); err != nil {
			return err
		}
	}
	if o.appendEOS {
		id, err := eosID(eng, o.tokenizer, o.eosToken)
		if err != nil {
			return err
		}
		opts.AppendEOS, opts.EOSID = true, id
	}
	tcfg, err := readTokenizerConfig(o.tokenizer)
	if err != nil {
		return err
	}
	special, found, err := padToken(eng, tcfg, o.padToken)
	if err != nil {
		return err
	}
	if found {
		opts.Special = special
	} else {
		log.Warn("no pad token recorded (no pad_token or eos_token in tokenizer_config.json, no --pad-token): clients pad with 0 unless they pass pad_id",
			"tokenizer_config", tcfg.path)
	}
	if !o.quiet {
		opts.Progress = cmd.ErrOrStderr()
	}
	publish, err := o.stageRemoteOut(cmd.Context(), &opts)
	if err != nil {
		return err
	}
	sum, err := pipeline.Run(cmd.Context(), opts)
	if err != nil {
		return err
	}
	if publish != nil {
		if err := publish(); err != nil {
			return err
		}
		sum.Out = o.out
	}
	times.process = time.Since(processStart)
	printSummary(cmd.OutOrStdout(), sum, times)
	readGC().print(cmd.OutOrStdout(), o.memoryLimit)
	return nil
}

// processStart is when the process started (near enough: package initialisation).
var processStart = time.Now()

// runTimes are the parts of a tokenize run outside the pipeline's wall time.
type runTimes struct {
	load    time.Duration // loading the tokenizer
	process time.Duration // the whole process, start to summary
}

func printSummary(w io.Writer, s pipeline.Summary, t runTimes) {
	secs := s.Wall.Seconds()
	fmt.Fprintf(w, "dataset    %s\n", s.Out)
	fmt.Fprintf(w, "documents  %d read, %d rows written, %d skipped\n", s.Documents, s.Rows, s.SkippedTotal())
	reasons := make([]string, 0, len(s.Skipped))
	for r := range s.Skipped {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(w, "  skipped  %-18s %d\n", r+":", s.Skipped[r])
	}
	if s.InvalidUTF8 > 0 {
		fmt.Fprintf(w, "  invalid UTF-8 replaced by U+FFFD in %d documents\n", s.InvalidUTF8)
	}
	if s.Truncated > 0 || s.Split > 0 {
		fmt.Fprintf(w, "  over --max-length: %d truncated, %d split\n", s.Truncated, s.Split)
	}
	fmt.Fprintf(w, "tokens     %d (longest row %d)\n", s.Tokens, s.LongestRow)
	if s.TrainedTokens > 0 {
		fmt.Fprintf(w, "trained    %d tokens (%.1f%%) carry labels\n", s.TrainedTokens, 100*float64(s.TrainedTokens)/float64(max(s.Tokens, 1)))
	}
	fmt.Fprintf(w, "shards     %d\n", s.Shards)
	fmt.Fprintf(w, "wall time  %s tokenizing", s.Wall.Round(1e6))
	if s.Resumed {
		fmt.Fprintf(w, " (this run, resumed)")
	}
	fmt.Fprintf(w, "; tokenizer load %s; process %s in all\n", t.load.Round(1e6), t.process.Round(1e6))
	if secs > 0 {
		fmt.Fprintf(w, "throughput %.2f MB/s of text, %.0f docs/s, %.2fM tokens/s (over the tokenizing wall time)\n",
			float64(s.InputBytes)/secs/1e6, float64(s.Documents)/secs, float64(s.Tokens)/secs/1e6)
	}
	st := s.Stages
	fmt.Fprintf(w, "stages     reader %.0f%% busy, workers %.0f%%, writer %.0f%% (%.0f%% waiting for the previous shard's close)\n",
		100*st.Reader, 100*st.Workers, 100*st.Writer, 100*st.WriterOnCloser)
	if b := st.Bottleneck(); b != "" && s.InputBytes >= adviceMinBytes {
		fmt.Fprintf(w, "bottleneck %s\n", b)
	}
	for _, warning := range summaryWarnings(s) {
		fmt.Fprintf(w, "WARNING    %s\n", warning)
	}
}

// adviceMinBytes is the input below which the summary gives no speed advice: a run of a few seconds spends its time
// starting up, and its stage shares say nothing about a large corpus.
const adviceMinBytes = 256 << 20

// unstableShare is the share of skipped conversations (template not prefix-stable) above which the summary says
// loudly that the dataset lacks most of its corpus, and how to keep it.
const unstableShare = 0.05

// summaryWarnings are what a run that exited 0 must still tell its user: the dataset is not what they think.
func summaryWarnings(s pipeline.Summary) []string {
	var out []string
	if s.LongRows > 0 {
		out = append(out, fmt.Sprintf("%d rows are longer than %d tokens (the longest %d) and no --max-length was "+
			"given: a batch holding such a row is gigabytes in the client (8 rows x %d tokens x 8 bytes per key). "+
			"Tokenize again with --max-length N (the longest context you train on) and --overflow split or truncate, "+
			"or give the Loader max_length to leave them out", s.LongRows, pipeline.LongRowTokens, s.LongestRow, s.LongestRow))
	}
	if n := s.Skipped[chat.KindUnstable]; n > 0 && s.Documents > 0 && float64(n)/float64(s.Documents) > unstableShare {
		out = append(out, fmt.Sprintf("%d of %d conversations (%.0f%%) were skipped because the chat template is not "+
			"prefix-stable (rendering a conversation changes the text of its earlier turns, e.g. reasoning dropped "+
			"from past assistant turns), so their labels cannot be cut from one rendering. Tokenize again with "+
			"--last-turn-only to train on the last assistant turn of each of them", n, s.Documents,
			100*float64(n)/float64(s.Documents)))
	}
	return out
}

// eosID resolves the EOS token: --eos-token, else eos_token from tokenizer_config.json beside the tokenizer.
func eosID(eng tokenize.Engine, tokenizerPath, token string) (int32, error) {
	if token == "" {
		cfg := filepath.Join(filepath.Dir(tokenizerPath), "tokenizer_config.json")
		data, err := tokenize.ReadConfigFile(cfg)
		if errors.Is(err, fs.ErrNotExist) {
			data, err = tokenize.ReadConfigFile(cfg + ".gz")
		}
		if errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("--append-eos needs the EOS token: pass --eos-token TOKEN, or put the tokenizer's "+
				"tokenizer_config.json (its eos_token) beside %s (looked for %s and %s.gz)", tokenizerPath, cfg, cfg)
		}
		if err != nil {
			return 0, fmt.Errorf("--append-eos: %w", err)
		}
		var c struct {
			EOS json.RawMessage `json:"eos_token"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			return 0, fmt.Errorf("--append-eos: %s: %w", cfg, err)
		}
		var s string
		var obj struct {
			Content string `json:"content"`
		}
		switch {
		case json.Unmarshal(c.EOS, &s) == nil && s != "":
			token = s
		case json.Unmarshal(c.EOS, &obj) == nil && obj.Content != "":
			token = obj.Content
		default:
			return 0, fmt.Errorf("--append-eos: %s has no eos_token; pass --eos-token", cfg)
		}
	}
	id, ok := eng.TokenToID(token)
	if !ok {
		return 0, fmt.Errorf("--append-eos: EOS token %q is not in the tokenizer's vocabulary", token)
	}
	return id, nil
}

// parseSize reads "500MB", "2GiB", "1048576" (bytes).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	units := []struct {
		suffix string
		mult   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q is not a positive size (e.g. 500MB, 2GiB)", s)
	}
	return int64(v * float64(mult)), nil
}

// parseTask reads --task I/N ("" means the whole input).
func parseTask(s string) (int, int, error) {
	if s == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("--task %q: want I/N with 0 <= I < N (e.g. --task $SLURM_ARRAY_TASK_ID/16)", s)
	}
	return i, n, nil
}
