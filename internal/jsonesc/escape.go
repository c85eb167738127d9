package jsonesc

import (
	"unicode/utf16"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// safe marks the ASCII bytes a string literal holds as they are: printable
// ASCII but the quote and the backslash.
var safe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendString appends s to b as a JSON string literal and returns the
// extended slice. The quote, the backslash and the control characters are
// escaped (\" \\ \b \f \n \r \t, the others as \u00XX, lower-case hex, as
// Python writes them). With ascii, every other non-ASCII character is
// escaped too, as \uXXXX or a UTF-16 surrogate pair, which is what Python's
// json.dumps writes with its default ensure_ascii=True; without, it is
// copied as UTF-8. A byte that is not valid UTF-8 is written as the escape
// \ufffd (U+FFFD, as encoding/json does). AppendString does not allocate
// when b has room.
func AppendString(b []byte, s string, ascii bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = appendU4(b, rune(c))
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = appendU4(append(b, s[start:i]...), utf8.RuneError)
		case ascii && r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			b = appendU4(appendU4(append(b, s[start:i]...), r1), r2)
		case ascii:
			b = appendU4(append(b, s[start:i]...), r)
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendU4 appends the escape \uXXXX of r, which is at most 0xffff.
func appendU4(b []byte, r rune) []byte {
	return append(b, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}
