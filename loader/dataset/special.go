package dataset

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gload/gload/internal/safename"
)

// Where the pad token recorded in a dataset came from.
const (
	PadFromPadToken = "pad_token" // the tokenizer's pad_token
	PadFromEOSToken = "eos_token" // no pad_token: the tokenizer's eos_token, what transformers users set pad to
	PadFromFlag     = "flag"      // given explicitly when the dataset was written
)

// SpecialTokens is what the writer knew about the tokenizer's special tokens,
// kept in dataset_info.json under the key "gload" (Hugging Face's
// DatasetInfo.from_dict ignores keys it does not know, in every version):
//
//	"gload": {"pad_from": "eos_token", "pad_token": "</s>", "pad_token_id": 2}
//
// The server pads batches with PadID unless the client asks for another id.
// A zero SpecialTokens (PadFrom "") records nothing.
type SpecialTokens struct {
	PadID    int32
	PadToken string
	PadFrom  string // PadFromPadToken, PadFromEOSToken or PadFromFlag; "" when unknown
}

// Known reports whether a pad token is recorded.
func (s SpecialTokens) Known() bool { return s.PadFrom != "" }

func (s SpecialTokens) validate() error {
	switch s.PadFrom {
	case "":
		if s != (SpecialTokens{}) {
			return fmt.Errorf("%w: special tokens: pad_token_id %d without pad_from", ErrBadInput, s.PadID)
		}
	case PadFromPadToken, PadFromEOSToken, PadFromFlag:
		if s.PadID < 0 {
			return fmt.Errorf("%w: special tokens: pad_token_id %d < 0", ErrBadInput, s.PadID)
		}
	default:
		return fmt.Errorf("%w: special tokens: unknown pad_from %q", ErrBadInput, s.PadFrom)
	}
	return nil
}

func (s SpecialTokens) json() jsonObj {
	return jsonObj{
		{"pad_from", s.PadFrom},
		{"pad_token", s.PadToken},
		{"pad_token_id", jsonNumber(strconv.FormatInt(int64(s.PadID), 10))},
	}
}

// ReadSpecialTokens reads the "gload" entry of dir/dataset_info.json. A
// dataset written by Hugging Face itself (no entry, or no dataset_info.json)
// gives the zero SpecialTokens and no error; a malformed entry is an error
// naming the file and the key.
func ReadSpecialTokens(dir string) (SpecialTokens, error) {
	path := filepath.Join(dir, InfoFile)
	b, err := safename.ReadFile(path, safename.MaxMetaBytes)
	if errors.Is(err, os.ErrNotExist) {
		return SpecialTokens{}, nil
	}
	if err != nil {
		return SpecialTokens{}, fmt.Errorf("read %s: %w", path, err)
	}
	var info struct {
		Gload *struct {
			PadFrom  string           `json:"pad_from"`
			PadToken string           `json:"pad_token"`
			PadID    *json.RawMessage `json:"pad_token_id"`
		} `json:"gload"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return SpecialTokens{}, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	if info.Gload == nil || info.Gload.PadFrom == "" && info.Gload.PadID == nil {
		return SpecialTokens{}, nil // no entry, or one with other keys only (chat_template_date)
	}
	s := SpecialTokens{PadFrom: info.Gload.PadFrom, PadToken: info.Gload.PadToken}
	if info.Gload.PadID == nil {
		return SpecialTokens{}, fmt.Errorf("%s: %w: gload.pad_token_id missing", path, ErrCorrupt)
	}
	id, err := strconv.ParseInt(string(*info.Gload.PadID), 10, 64)
	if err != nil || id < 0 || id > math.MaxInt32 {
		return SpecialTokens{}, fmt.Errorf("%s: %w: gload.pad_token_id %s is not a token id", path, ErrCorrupt, *info.Gload.PadID)
	}
	s.PadID = int32(id)
	if err := s.validate(); err != nil || !s.Known() {
		return SpecialTokens{}, fmt.Errorf("%s: %w: gload.pad_from %q (want %s, %s or %s)", path, ErrCorrupt, s.PadFrom,
			PadFromPadToken, PadFromEOSToken, PadFromFlag)
	}
	return s, nil
}
