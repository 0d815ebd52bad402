package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/gload/gload/tokenize"
	"github.com/gload/gload/tokenize/corpus"
)

type encodeOptions struct {
	tokenizer    string
	engine       string
	addSpecial   bool
	splitSpecial bool
	decode       bool
	workers      int
	textField    string
	bench        bool
	passes       int
}

func newEncodeCmd(g *globalOptions) *cobra.Command {
	o := &encodeOptions{}
	cmd := &cobra.Command{
		Use:   "encode --tokenizer tokenizer.json < docs.jsonl > ids.jsonl",
		Short: `Tokenize {"text": ...} lines from stdin into {"ids": [...]} lines, in order`,
		Long: `Reads JSON lines from standard input, tokenizes the text field of each with a Hugging Face tokenizer.json
and writes one {"ids": [...]} line per input line, in the same order. Without --add-special-tokens the ids equal
Hugging Face's encode(text, add_special_tokens=False).ids. With --decode each line also carries "decoded", the ids
turned back into text. Text that is not valid UTF-8 has each ill-formed sequence replaced by U+FFFD first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tokenizer, "tokenizer", "", "tokenizer.json (plain or .json.gz)")
	f.StringVar(&o.engine, "engine", "go", "tokenizer engine: go, or hf (Rust core; binaries built with -tags hftokenizers)")
	f.BoolVar(&o.addSpecial, "add-special-tokens", false, "apply the tokenizer's post-processor (BOS, [CLS] ... [SEP])")
	f.BoolVar(&o.splitSpecial, "split-special-tokens", false, "treat special-token text in the input as plain text")
	f.BoolVar(&o.decode, "decode", false, `also write "decoded": the ids turned back into text`)
	f.IntVar(&o.workers, "workers", runtime.NumCPU(), "tokenizing goroutines")
	f.StringVar(&o.textField, "text-field", "text", "JSON field holding the text (dotted path for nested objects)")
	f.IntVar(&o.passes, "passes", 1, "with --bench: passes over the input; the fastest is reported")
	f.BoolVar(&o.bench, "bench", false, "read all input first, then time tokenization alone; print one JSON line of throughput instead of ids")
	_ = cmd.MarkFlagRequired("tokenizer")
	return cmd
}

type encodeJob struct {
	line int64
	text string
	err  error
	out  []byte
}

func (o *encodeOptions) run(in io.Reader, out io.Writer) error {
	eng, err := tokenize.LoadEngine(o.engine, o.tokenizer, tokenize.Options{SplitSpecialTokens: o.splitSpecial})
	if err != nil {
		return err
	}
	workers := max(o.workers, 1)
	ex := corpus.NewExtractor(corpus.Options{TextField: o.textField})
	if o.bench {
		return o.runBench(eng, in, out, ex, workers)
	}
	br := bufio.NewReaderSize(in, 1<<20)
	bw := bufio.NewWriterSize(out, 1<<20)
	const batch = 512
	var line int64
	for {
		jobs := make([]encodeJob, 0, batch)
		for len(jobs) < batch {
			b, err := readLine(br, corpus.DefaultMaxDocBytes)
			if errors.Is(err, errLineTooLong) {
				return fmt.Errorf("stdin: line %d: %w", line+1, err)
			}
			if len(b) > 0 {
				line++
				jobs = append(jobs, encodeJob{line: line, text: string(b)})
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("stdin: line %d: %w", line+1, err)
			}
		}
		if len(jobs) == 0 {
			break
		}
		var wg sync.WaitGroup
		next := make(chan int, len(jobs))
		for i := range jobs {
			next <- i
		}
		close(next)
		for range min(workers, len(jobs)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					o.encodeOne(eng, ex, &jobs[i])
				}
			}()
		}
		wg.Wait()
		for i := range jobs {
			if jobs[i].err != nil {
				_ = bw.Flush() // keep the ids of the lines before the bad one
				return jobs[i].err
			}
			if _, err := bw.Write(jobs[i].out); err != nil {
				return err
			}
		}
		if len(jobs) < batch {
			break
		}
	}
	return bw.Flush()
}

// extractText pulls the text field out of one JSON line with the corpus readers' extractor, so invalid UTF-8 is
// repaired by the same rule as everywhere else; ok is false for a blank line. An empty text is ok with "".
func extractText(ex *corpus.Extractor, line string, n int64) (text string, ok bool, err error) {
	raw := strings.TrimRight(line, "\r\n")
	if strings.TrimSpace(raw) == "" {
		return "", false, nil
	}
	doc, skip := ex.Extract(corpus.Record{Path: "stdin", Line: n, Raw: []byte(raw), Kind: corpus.JSONLine, Size: int64(len(raw))})
	if skip != nil {
		if skip.Reason == corpus.Empty {
			return "", true, nil
		}
		return "", false, skip
	}
	return doc.Text, true, nil
}

func (o *encodeOptions) encodeOne(eng tokenize.Engine, ex *corpus.Extractor, j *encodeJob) {
	raw := strings.TrimRight(j.text, "\r\n")
	if strings.TrimSpace(raw) == "" {
		j.out = []byte("{\"ids\":[]}\n")
		return
	}
	text, _, err := extractText(ex, raw, j.line)
	if err != nil {
		j.err = err
		return
	}
	ids, err := eng.EncodeTo(nil, text, o.addSpecial)
	if err != nil {
		j.err = err
		return
	}
	b := make([]byte, 0, 16+8*len(ids))
	b = append(b, `{"ids":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	b = append(b, ']')
	if o.decode {
		dec, _ := json.Marshal(eng.Decode(ids, false))
		b = append(b, `,"decoded":`...)
		b = append(b, dec...)
	}
	j.out = append(b, "}\n"...)
}

// runBench reads every document, then encodes them all on workers goroutines and reports throughput, so the
// number measures the tokenizer alone (no JSON parsing, no output formatting).
func (o *encodeOptions) runBench(eng tokenize.Engine, in io.Reader, out io.Writer, ex *corpus.Extractor, workers int) error {
	br := bufio.NewReaderSize(in, 1<<20)
	var texts []string
	var size int64
	for line := int64(1); ; line++ {
		b, err := readLine(br, corpus.DefaultMaxDocBytes)
		if errors.Is(err, errLineTooLong) {
			return fmt.Errorf("stdin: line %d: %w", line, err)
		}
		if len(b) > 0 {
			j := encodeJob{line: line, text: string(b)}
			text, ok, jerr := extractText(ex, j.text, line)
			if jerr != nil {
				return jerr
			}
			if ok {
				texts = append(texts, text)
				size += int64(len(text))
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	var best benchPass
	for pass := 0; pass < max(o.passes, 1); pass++ {
		p, err := encodeAll(eng, texts, o.addSpecial, workers)
		if err != nil {
			return err
		}
		if pass == 0 || p.secs < best.secs {
			best = p
		}
	}
	secs := best.secs
	res := map[string]any{"engine": o.engine, "workers": workers, "documents": len(texts), "bytes": size,
		"tokens": best.tokens, "seconds": secs, "mb_per_s": float64(size) / secs / 1e6,
		"tokens_per_s": float64(best.tokens) / secs, "passes": max(o.passes, 1), "workers_busy": best.busy,
		"steady_mb_per_s": float64(best.steadyBytes) / best.steadySecs / 1e6}
	b, _ := json.Marshal(res)
	_, err := fmt.Fprintf(out, "%s\n", b)
	return err
}

// benchPass is one pass of encodeAll over every text.
type benchPass struct {
	tokens int64
	secs   float64
	busy   float64 // the workers' busy share of secs (1: none idled before the last one finished)
	// The pass until the first worker found no document left: the bytes of the documents finished by then and
	// the seconds it took (documents still in progress are not counted). With one worker, the whole pass.
	steadyBytes int64
	steadySecs  float64
}

// encodeAll encodes every text on workers goroutines.
func encodeAll(eng tokenize.Engine, texts []string, addSpecial bool, workers int) (benchPass, error) {
	var tokens, next, busyNs, done atomic.Int64
	var firstErr error
	var errOnce, drainOnce sync.Once
	var p benchPass
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []int32
			var n int64
			for {
				i := int(next.Add(1) - 1)
				if i >= len(texts) {
					drainOnce.Do(func() { p.steadyBytes, p.steadySecs = done.Load(), time.Since(start).Seconds() })
					break
				}
				var err error
				buf, err = eng.EncodeTo(buf[:0], texts[i], addSpecial)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
				}
				n += int64(len(buf))
				done.Add(int64(len(texts[i])))
			}
			tokens.Add(n)
			busyNs.Add(int64(time.Since(start)))
		}()
	}
	wg.Wait()
	p.tokens, p.secs = tokens.Load(), time.Since(start).Seconds()
	p.busy = float64(busyNs.Load()) / 1e9 / p.secs / float64(workers)
	return p, firstErr
}

// errLineTooLong is a line of stdin over the document cap.
var errLineTooLong = fmt.Errorf("longer than %d bytes (corpus.DefaultMaxDocBytes, the largest document gload reads)", corpus.DefaultMaxDocBytes)

// readLine is br.ReadBytes('\n') that stops with errLineTooLong once the
// line passes max bytes, so stdin without newlines (/dev/zero) cannot take
// all memory.
func readLine(br *bufio.Reader, max int64) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if int64(len(line))+int64(len(frag)) > max+1 { // +1: the newline
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}
