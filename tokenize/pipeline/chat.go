package pipeline

import (
	"errors"
	"fmt"

	"github.com/gload/gload/tokenize/chat"
	"github.com/gload/gload/tokenize/corpus"
)

// chatRecord fills it from one record of a chat corpus (Options.Chat): input_ids and labels, or a skip whose reason
// is the chat rule's kind (template raised, not prefix-stable, bad record ...) with file:line and the detail.
func (w *writer) chatRecord(it *item, rec corpus.Record, ex *corpus.Extractor) {
	where := fmt.Sprintf("%s:%d", rec.Path, rec.Line)
	switch rec.Kind {
	case corpus.JSONLine:
	case corpus.Oversized:
		it.reason, it.where = "too large", fmt.Sprintf("%s (%d bytes)", where, rec.Size)
		return
	default:
		it.reason, it.where = chat.KindBadRecord, where+" (not a JSON record: --format chat reads JSON Lines, Parquet and HF dataset dirs)"
		return
	}
	it.text = int64(len(rec.Raw))
	s, err := w.opts.Chat.Record(rec.Raw)
	if err != nil {
		var se *chat.SkipError
		if errors.As(err, &se) {
			it.reason, it.where = se.Kind, where+" ("+se.Msg+")"
		} else {
			it.reason, it.where = "chat error", where+" ("+err.Error()+")"
		}
		return
	}
	if len(s.InputIDs) == 0 {
		it.reason, it.where = "no tokens", where
		return
	}
	if m := w.opts.MaxLength; m > 0 && len(s.InputIDs) > m {
		// Only with --overflow drop: truncation is the encoder's (chat.Options.MaxLength).
		it.reason, it.where = "too long", where
		return
	}
	if len(s.InputIDs) < w.opts.MinLength {
		it.reason, it.where = "too short", where
		return
	}
	if len(w.opts.Corpus.KeepColumns) > 0 {
		// --keep-columns: the record's fields, as plain text carries them (strings as they are, other values as
		// compact JSON, missing or null as null).
		doc, skip := ex.Columns(rec)
		if skip != nil {
			it.reason, it.where = chat.KindBadRecord, where+" ("+skip.Detail+")"
			return
		}
		it.cols, it.invalid = doc.Cols, doc.InvalidUTF8
	}
	it.trunc = s.Truncated > 0
	it.rows = [][]int32{s.InputIDs}
	it.labels = [][]int32{s.Labels}
}
