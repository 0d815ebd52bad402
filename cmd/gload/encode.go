package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/gload/gload/tokenize"
)

type encodeOptions struct {
	tokenizer    string
	engine       string
	addSpecial   bool
	splitSpecial bool
	decode       bool
	workers      int
	textField    string
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
	path := strings.Split(o.textField, ".")
	br := bufio.NewReaderSize(in, 1<<20)
	bw := bufio.NewWriterSize(out, 1<<20)
	const batch = 512
	var line int64
	for {
		jobs := make([]encodeJob, 0, batch)
		for len(jobs) < batch {
			b, err := br.ReadBytes('\n')
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
					o.encodeOne(eng, &jobs[i], path)
				}
			}()
		}
		wg.Wait()
		for i := range jobs {
			if jobs[i].err != nil {
				return fmt.Errorf("stdin:%d: %w", jobs[i].line, jobs[i].err)
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

func (o *encodeOptions) encodeOne(eng tokenize.Engine, j *encodeJob, path []string) {
	raw := strings.TrimRight(j.text, "\r\n")
	if strings.TrimSpace(raw) == "" {
		j.out = []byte("{\"ids\":[]}\n")
		return
	}
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		j.err = fmt.Errorf("malformed JSON: %v", err)
		return
	}
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			j.err = fmt.Errorf("field %q: not an object", o.textField)
			return
		}
		if v, ok = m[k]; !ok {
			j.err = fmt.Errorf("field %q missing", o.textField)
			return
		}
	}
	text, ok := v.(string)
	if !ok {
		j.err = fmt.Errorf("field %q is not a string", o.textField)
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
