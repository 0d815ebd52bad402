package tokjson

import (
	"strings"

	"github.com/dlclark/regexp2/v2"
)

// This file belongs to the normalize package's owner (Replace normalizer and decoder); pretok may use it too.

// CompileOniguruma compiles an Oniguruma (default syntax, as the onig crate uses) pattern of tokenizer.json with
// regexp2, which reads most of it the same way. Differences are bridged (Multiline gives Oniguruma's line anchors
// for ^ and $; \w, \W, \b and \B use Oniguruma's word characters, which include Mc and Me marks) or refused, never
// approximated silently.
func CompileOniguruma(pattern, path string) (*regexp2.Regexp, error) {
	expr, bad := translateOniguruma(pattern)
	if bad != "" {
		return nil, Unsupported(path, "regex %q: Oniguruma construct %s", pattern, bad)
	}
	re, err := regexp2.Compile(expr, regexp2.Multiline)
	if err != nil {
		return nil, Unsupported(path, "regex %q: %v", pattern, err)
	}
	return re, nil
}

// onigWord is Oniguruma's Unicode \w (.NET's lacks Mc and Me).
const onigWord = `\p{L}\p{M}\p{Nd}\p{Pc}`

// translateOniguruma rewrites pattern for regexp2; bad names the first construct that has no faithful rewrite.
func translateOniguruma(pattern string) (expr, bad string) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\' && i+1 < len(pattern):
			e := pattern[i+1]
			i++
			switch e {
			case 'h', 'H', 'K', 'y', 'Y', 'O':
				return "", `\` + string(e)
			case 'w':
				if inClass {
					b.WriteString(onigWord)
				} else {
					b.WriteString("[" + onigWord + "]")
				}
			case 'W':
				if inClass {
					return "", `\W inside a class`
				}
				b.WriteString("[^" + onigWord + "]")
			case 'b', 'B':
				switch {
				case inClass: // backspace
					b.WriteString(`\b`)
				case e == 'b':
					b.WriteString(`(?:(?<=[` + onigWord + `])(?![` + onigWord + `])|(?<![` + onigWord + `])(?=[` + onigWord + `]))`)
				default:
					b.WriteString(`(?:(?<=[` + onigWord + `])(?=[` + onigWord + `])|(?<![` + onigWord + `])(?![` + onigWord + `]))`)
				}
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		case c == '[' && inClass:
			return "", "nested class or POSIX bracket"
		case c == '[':
			inClass = true
			b.WriteByte('[')
			if strings.HasPrefix(pattern[i+1:], "^") {
				b.WriteByte('^')
				i++
			}
			if strings.HasPrefix(pattern[i+1:], "]") { // a leading ']' is a literal
				b.WriteString(`\]`)
				i++
			}
		case c == ']' && inClass:
			inClass = false
			b.WriteByte(']')
		case c == '&' && inClass && strings.HasPrefix(pattern[i:], "&&"):
			return "", "class intersection &&"
		case c == '(' && strings.HasPrefix(pattern[i:], "(?~"):
			return "", "absent operator (?~...)"
		case c == '{' && !inClass && strings.HasPrefix(pattern[i:], "{,"):
			return "", "interval {,n}"
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), ""
}
