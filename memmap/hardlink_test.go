package memmap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// TestFromFileHardLink: a file with a second name is not mapped shared
// unless asked (issue 12 item 14): a write through the mapping would
// change the other name's content.
func TestFromFileHardLink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("secret!!"), 0o644))
	link := filepath.Join(dir, "leaf.memmap")
	require.NoError(t, os.Link(victim, link))

	tests := []struct {
		name   string
		opts   []Option
		refuse bool
		writes bool // a store reaches the victim
	}{
		{"default", nil, true, false},
		{"Private", []Option{Private()}, false, false},
		{"HardLinks", []Option{HardLinks()}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := FromFile(link, tensor.Uint8, []int{8}, tt.opts...)
			if tt.refuse {
				require.ErrorIs(t, err, ErrHardLink)
				assert.Contains(t, err.Error(), link)
				assert.Contains(t, err.Error(), "2 names")
				return
			}
			require.NoError(t, err)
			defer Close(m)
			b, err := m.Bytes()
			require.NoError(t, err)
			assert.Equal(t, "secret!!", string(b))
			b[0] = 'S'
			require.NoError(t, Close(m))
			got, err := os.ReadFile(victim)
			require.NoError(t, err)
			assert.Equal(t, tt.writes, string(got) == "Secret!!", "victim now %q", got)
			require.NoError(t, os.WriteFile(victim, []byte("secret!!"), 0o644))
		})
	}

	// One name: mapped shared as before.
	require.NoError(t, os.Remove(victim))
	m, err := FromFile(link, tensor.Uint8, []int{8})
	require.NoError(t, err)
	f, _ := Of(m)
	assert.False(t, f.Private())
	require.NoError(t, Close(m))
}
