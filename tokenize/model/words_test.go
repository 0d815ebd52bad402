package model

import (
	"slices"
	"testing"
)

// TestEncodeWordsMatchesEncode checks that a batch through EncodeWords gives what Encode of each word in turn
// gives, for the BPE fixtures (byte-level and SentencePiece-style; the other models have no EncodeWords), in batches of several sizes, with the hot table cold and then warm.
func TestEncodeWordsMatchesEncode(t *testing.T) {
	for _, name := range []string{"llama3", "llama2", "gpt4o", "qwen3"} {
		t.Run(name, func(t *testing.T) {
			m := loadFixture(t, name)
			words, _ := goSourceWords(t)
			if max := 20_000; len(words) > max {
				words = words[:max]
			}
			ref := m.NewEncoder()
			var want []int32
			for _, w := range words {
				want = ref.Encode(w, want)
			}
			enc, ok := m.NewEncoder().(WordsEncoder)
			if !ok {
				t.Fatalf("%s's encoder has no EncodeWords", name)
			}
			for _, batch := range []int{1, 7, 4096} {
				for round := range 2 { // the second round finds the words in the hot table
					var got []int32
					for i := 0; i < len(words); i += batch {
						got = enc.EncodeWords(words[i:min(i+batch, len(words))], got)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("batch %d round %d: EncodeWords gave %d ids, Encode word by word %d (first difference at %d)",
							batch, round, len(got), len(want), firstDiff(got, want))
					}
				}
			}
		})
	}
}

func firstDiff(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
