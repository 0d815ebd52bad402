package tokjson

import "testing"

func TestIsNull(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{{"", true}, {"null", true}, {" null\n", true}, {"0", false}, {"[]", false}, {"{}", false}, {`"null"`, false}, {"nul", false}} {
		if got := IsNull([]byte(tc.in)); got != tc.want {
			t.Errorf("IsNull(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestByteLevelTableRoundTrip(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	s := ByteLevelEncode(all)
	back, ok := ByteLevelDecode(s)
	if !ok || string(back) != string(all) {
		t.Fatal("byte-level table does not round-trip")
	}
	if ByteToRune[' '] != 'Ġ' || ByteToRune['\n'] != 'Ċ' {
		t.Errorf("space maps to %q, newline to %q", ByteToRune[' '], ByteToRune['\n'])
	}
}
