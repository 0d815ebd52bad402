package tokjson

// GPT-2's byte-to-unicode table (bytes_to_unicode in Hugging Face tokenizers' ByteLevel): printable bytes map to
// themselves, the other 68 byte values map to U+0100 onwards in byte order.
var (
	// ByteToRune maps a raw byte to the rune that stands for it in byte-level vocabularies.
	ByteToRune [256]rune
	runeToByte map[rune]byte
)

func init() {
	runeToByte = make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if printable {
			ByteToRune[b] = rune(b)
		} else {
			ByteToRune[b] = rune(256 + n)
			n++
		}
		runeToByte[ByteToRune[b]] = byte(b)
	}
}

// RuneToByte inverts ByteToRune.
func RuneToByte(r rune) (byte, bool) {
	b, ok := runeToByte[r]
	return b, ok
}

// ByteLevelDecode maps a byte-level string (every rune from ByteToRune) back to raw bytes. ok is false when s
// holds a rune outside the table (then the result is meaningless).
func ByteLevelDecode(s string) (raw []byte, ok bool) {
	raw = make([]byte, 0, len(s))
	for _, r := range s {
		b, found := runeToByte[r]
		if !found {
			return nil, false
		}
		raw = append(raw, b)
	}
	return raw, true
}

// ByteLevelEncode maps raw bytes to their byte-level string.
func ByteLevelEncode(raw []byte) string {
	out := make([]rune, len(raw))
	for i, b := range raw {
		out[i] = ByteToRune[b]
	}
	return string(out)
}
