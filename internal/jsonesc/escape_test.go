package jsonesc

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendString(t *testing.T) {
	tests := []struct {
		name, in, utf8, ascii string
	}{
		{"plain", "abc", `"abc"`, `"abc"`},
		{"empty", "", `""`, `""`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`, `"a\"b\\c"`},
		{"short escapes", "\b\f\n\r\t", `"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
		{"other controls", "\x00\x1f", `"\u0000\u001f"`, `"\u0000\u001f"`},
		{"DEL is plain", "\x7f", "\"\x7f\"", "\"\x7f\""},
		{"latin", "é", `"é"`, `"\u00e9"`},
		{"astral", "😀", `"😀"`, `"\ud83d\ude00"`},
		{"invalid byte", "a\xffb", `"a\ufffdb"`, `"a\ufffdb"`},
		{"html kept", "<&>", `"<&>"`, `"<&>"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.utf8, string(AppendString(nil, tt.in, false)))
			assert.Equal(t, tt.ascii, string(AppendString(nil, tt.in, true)))
		})
	}
}

// FuzzAppendString checks that encoding/json reads back what AppendString
// writes, in both modes, and that ascii mode writes only ASCII.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"\\\n", "é😀", "\xff\xfe", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := strings.ToValidUTF8(s, "\ufffd")
		if !utf8.ValidString(s) {
			// encoding/json replaces each invalid byte, ToValidUTF8 each run.
			var b strings.Builder
			for i := 0; i < len(s); {
				r, n := utf8.DecodeRuneInString(s[i:])
				b.WriteRune(r)
				i += n
			}
			want = b.String()
		}
		for _, ascii := range []bool{false, true} {
			out := AppendString(nil, s, ascii)
			var got string
			require.NoError(t, json.Unmarshal(out, &got), "%q", out)
			assert.Equal(t, want, got)
			if ascii {
				for _, c := range out {
					require.Less(t, c, byte(utf8.RuneSelf), "%q", out)
				}
			}
		}
	})
}

func TestAppendStringDoesNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 64)
	n := testing.AllocsPerRun(100, func() { buf = AppendString(buf[:0], "a\"é\x01😀", true) })
	assert.Zero(t, n)
}
