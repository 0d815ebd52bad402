package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSpecialTokensRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		sp   SpecialTokens
		want string // substring of dataset_info.json ("" : no gload entry)
	}{
		{"none", SpecialTokens{}, ""},
		{"pad", SpecialTokens{PadID: 0, PadToken: "<pad>", PadFrom: PadFromPadToken},
			"\"gload\": {\n    \"pad_from\": \"pad_token\",\n    \"pad_token\": \"<pad>\",\n    \"pad_token_id\": 0\n  },\n  \"homepage\""},
		{"eos", SpecialTokens{PadID: 128001, PadToken: "<|end_of_text|>", PadFrom: PadFromEOSToken}, `"pad_token_id": 128001`},
		{"flag-unicode", SpecialTokens{PadID: 7, PadToken: "▁pad", PadFrom: PadFromFlag}, `"pad_token": "\u2581pad"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeDataset(t, dir, genRows(3, 0, 4, 1), WriterOptions{Special: tc.sp}, 10)
			info, err := os.ReadFile(filepath.Join(dir, InfoFile))
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && strings.Contains(string(info), "gload") || !strings.Contains(string(info), tc.want) {
				t.Errorf("dataset_info.json:\n%s\nwant it to hold %q", info, tc.want)
			}
			got, err := ReadSpecialTokens(dir)
			if err != nil || got != tc.sp {
				t.Errorf("ReadSpecialTokens = %+v, %v; want %+v", got, err, tc.sp)
			}
		})
	}
}

func TestSpecialTokensErrors(t *testing.T) {
	for _, sp := range []SpecialTokens{{PadID: 3}, {PadID: -1, PadFrom: PadFromFlag}, {PadFrom: "guess"}} {
		if _, err := CreateShard(t.TempDir(), 0, WriterOptions{Special: sp}); !errors.Is(err, ErrBadInput) {
			t.Errorf("CreateShard(Special %+v) = %v, want ErrBadInput", sp, err)
		}
	}
	for _, tc := range []struct{ name, info, want string }{
		{"not-json", `{"gload": `, "dataset_info.json"},
		{"id-missing", `{"gload": {"pad_from": "pad_token"}}`, "gload.pad_token_id missing"},
		{"id-negative", `{"gload": {"pad_from": "pad_token", "pad_token_id": -2}}`, "gload.pad_token_id -2 is not a token id"},
		{"id-float", `{"gload": {"pad_from": "pad_token", "pad_token_id": 2.5}}`, "gload.pad_token_id 2.5 is not a token id"},
		{"id-huge", `{"gload": {"pad_from": "pad_token", "pad_token_id": 4294967296}}`, "is not a token id"},
		{"from-unknown", `{"gload": {"pad_from": "magic", "pad_token_id": 1}}`, `gload.pad_from "magic"`},
		{"from-missing", `{"gload": {"pad_token_id": 1}}`, `gload.pad_from ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, InfoFile), []byte(tc.info), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadSpecialTokens(dir)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadSpecialTokens = %v, want ErrCorrupt naming %q", err, tc.want)
			}
		})
	}
	// Hugging Face's own datasets have no entry, or no dataset_info.json at all.
	dir := t.TempDir()
	if sp, err := ReadSpecialTokens(dir); err != nil || sp.Known() {
		t.Errorf("no dataset_info.json: %+v, %v", sp, err)
	}
	os.WriteFile(filepath.Join(dir, InfoFile), []byte(`{"features": {}}`), 0o644)
	if sp, err := ReadSpecialTokens(dir); err != nil || sp.Known() {
		t.Errorf("no gload entry: %+v, %v", sp, err)
	}
}

// FuzzReadSpecialTokens: any dataset_info.json gives a valid SpecialTokens or
// an ErrCorrupt, never a panic, and what it accepts round-trips through the
// writer.
func FuzzReadSpecialTokens(f *testing.F) {
	f.Add(`{"gload": {"pad_from": "eos_token", "pad_token": "</s>", "pad_token_id": 2}}`)
	f.Add(`{"gload": {"pad_from": "pad_token", "pad_token_id": 1e3}}`)
	f.Add(`{"gload": null}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, info string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, InfoFile), []byte(info), 0o644); err != nil {
			t.Fatal(err)
		}
		sp, err := ReadSpecialTokens(dir)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if err := sp.validate(); err != nil {
			t.Fatalf("accepted %+v: %v", sp, err)
		}
		if !sp.Known() {
			return
		}
		if err := os.WriteFile(filepath.Join(dir, InfoFile), []byte(datasetInfoJSON(nil, false, sp, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		if back, err := ReadSpecialTokens(dir); err != nil || back != sp {
			t.Fatalf("round trip %+v: %+v, %v", sp, back, err)
		}
	})
}
