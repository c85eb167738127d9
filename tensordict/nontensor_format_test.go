package tensordict

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNonTensorStackFormat is issue 43 item 7: a NonTensorStack prints on
// one line in Go style (shape, kind, first values), not as Python's repr.
func TestNonTensorStackFormat(t *testing.T) {
	many := make([]any, 100)
	for i := range many {
		many[i] = i
	}
	tests := []struct {
		name   string
		values []any
		shape  []int
		verb   string
		want   string
	}{
		{"strings", []any{"a", "b", "c"}, []int{3}, "%v", `NonTensorStack[3] string ["a" "b" "c"]`},
		{"String", []any{"a", "b", "c"}, []int{3}, "%s", `NonTensorStack[3] string ["a" "b" "c"]`},
		{"quoted", []any{"a", "b"}, []int{2}, "%q", `"NonTensorStack[2] string [\"a\" \"b\"]"`},
		{"2-d ints", []any{1, 2, 3, 4}, []int{2, 2}, "%v", `NonTensorStack[2 2] int64 [1 2 3 4]`},
		{"numbers", []any{1, 2.5}, []int{2}, "%v", `NonTensorStack[2] number [1 2.5]`},
		{"mixed", []any{1, "b", 2.5, []string{"x"}, nil, true}, []int{2, 3}, "%v", `NonTensorStack[2 3] mixed [1 "b" 2.5 ["x"] null true]`},
		{"cut", many, []int{100}, "%v", `NonTensorStack[100] int64 [0 1 2 3 4 5 ...]`},
		{"long value", []any{strings.Repeat("x", 40), "y"}, []int{2}, "%v", `NonTensorStack[2] string ["xxxxxxxxxxxxxxxx... "y"]`},
		{"all values", many[:8], []int{8}, "%+v", `NonTensorStack[8] int64 [0 1 2 3 4 5 6 7]`},
		{"Go syntax", many[:8], []int{8}, "%#v", `NonTensorStack[8] int64 [0 1 2 3 4 5 6 7]`},
		{"other verb", []any{"a", "b"}, []int{2}, "%d", `%!d(*tensordict.NonTensorStack=NonTensorStack[2] string ["a" "b"])`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewNonTensorStack(tt.values, tt.shape...)
			require.NoError(t, err)
			got := fmt.Sprintf(tt.verb, s)
			assert.Equal(t, tt.want, got)
			assert.NotContains(t, got, "\n")
		})
	}
	assert.Equal(t, "<nil>", (*NonTensorStack)(nil).String())
}
