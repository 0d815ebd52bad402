package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/tokenize"
	"github.com/gload/gload/tokenize/chat"
	"github.com/gload/gload/tokenize/corpus"
	"github.com/gload/gload/tokenize/pipeline"
)

// chatFlags are tokenize's flags for --format chat (SFT conversations → input_ids + labels).
type chatFlags struct {
	template         string
	templateName     string
	messagesField    string
	toolsField       string
	promptField      string
	completionField  string
	lastTurnOnly     bool
	dropAllTruncated bool
	templateDate     string
}

func (c *chatFlags) add(f *pflag.FlagSet) {
	f.StringVar(&c.template, "chat-template", "", "with --format chat: tokenizer_config.json holding chat_template, or a .jinja file (default: tokenizer_config.json beside --tokenizer)")
	f.StringVar(&c.templateName, "chat-template-name", "", "with --format chat: which of a tokenizer_config.json's named templates (default: \"default\")")
	f.StringVar(&c.messagesField, "messages-field", "messages", "with --format chat: the field holding the list of {role, content} messages")
	f.StringVar(&c.toolsField, "tools-field", "tools", "with --format chat: the field holding the tools passed to the template (optional)")
	f.StringVar(&c.promptField, "prompt-field", "prompt", "with --format chat: prompt of prompt/completion records (messages or string)")
	f.StringVar(&c.completionField, "completion-field", "completion", "with --format chat: completion of prompt/completion records")
	f.BoolVar(&c.lastTurnOnly, "last-turn-only", false, "with --format chat: for templates that are not prefix-stable, train only the last assistant turn instead of skipping the conversation")
	f.BoolVar(&c.dropAllTruncated, "drop-all-truncated", false, "with --format chat: skip conversations whose trained tokens --max-length cut entirely")
	f.StringVar(&c.templateDate, "template-date", "", "with --format chat: the instant strftime_now() returns in every render, RFC 3339 or YYYY-MM-DD (default: the run's start; a --resume takes the interrupted run's); recorded in dataset_info.json")
}

// setup turns opts into a chat run: the encoder, JSON Lines input, labels.
func (c *chatFlags) setup(o *tokenizeOptions, eng tokenize.Engine, opts *pipeline.Options) error {
	tok, ok := eng.(*tokenize.Tokenizer)
	if !ok {
		return fmt.Errorf("--format chat needs --engine go (labels need token offsets)")
	}
	path, cfgPath := c.template, ""
	beside := filepath.Join(filepath.Dir(o.tokenizer), "tokenizer_config.json")
	if path == "" {
		path = beside
		if _, err := tokenize.ReadConfigFile(path); err != nil {
			path += ".gz"
		}
	} else if filepath.Ext(path) == ".jinja" {
		if _, err := tokenize.ReadConfigFile(beside); err == nil {
			cfgPath = beside // bos_token/eos_token for the template
		}
	}
	tmpl, err := chat.LoadTemplate(path, c.templateName, cfgPath)
	if err != nil {
		return fmt.Errorf("--chat-template: %w", err)
	}
	date, err := parseTemplateDate(c.templateDate, time.Now())
	if err != nil {
		return err
	}
	copts := chat.Options{
		Fields:            chat.Fields{Messages: c.messagesField, Tools: c.toolsField, Prompt: c.promptField, Completion: c.completionField},
		LastTurnOnly:      c.lastTurnOnly,
		DropAllTruncated:  c.dropAllTruncated,
		TemplateDate:      date,
		TemplateDateGiven: c.templateDate != "",
	}
	if o.overflow == string(pipeline.OverflowTruncate) {
		copts.MaxLength = o.maxLength
	}
	opts.Chat = chat.NewEncoder(tok, tmpl, copts)
	// Inputs by extension (JSONL, Parquet, HF dataset dirs); Parquet/Arrow rows come as JSON objects of all columns.
	opts.Corpus.Format = corpus.FormatAuto
	opts.Corpus.RowJSON = true
	return nil
}

// parseTemplateDate reads --template-date: RFC 3339 (with a zone) or a plain date (midnight UTC); "" is now.
func parseTemplateDate(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return now.UTC().Truncate(time.Second), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--template-date %q: want RFC 3339 (2024-07-23T10:00:00Z) or YYYY-MM-DD", s)
}

// showLabels prints row n's labels (inspect --show-labels): the trained share and, with a tokenizer, the text with
// every run of trained tokens between « and ».
func showLabels(w io.Writer, ds *dataset.Dataset, eng tokenize.Engine, n int, ids []int32) error {
	if !ds.HasLabels() {
		return fmt.Errorf("--show-labels: the dataset has no labels column (not written with --format chat)")
	}
	labels, err := ds.AppendLabels(nil, n)
	if err != nil {
		return err
	}
	trained := 0
	for _, l := range labels {
		if l != chat.IgnoreIndex {
			trained++
		}
	}
	fmt.Fprintf(w, "  labels %v\n  trained %d of %d tokens\n", labels, trained, len(labels))
	if eng == nil {
		return nil
	}
	var b strings.Builder
	for start := 0; start < len(ids); {
		on := labels[start] != chat.IgnoreIndex
		end := start
		for end < len(ids) && (labels[end] != chat.IgnoreIndex) == on {
			end++
		}
		text := eng.Decode(ids[start:end], false)
		if on {
			text = "«" + text + "»"
		}
		b.WriteString(text)
		start = end
	}
	fmt.Fprintf(w, "  marked %q\n", b.String())
	return nil
}
