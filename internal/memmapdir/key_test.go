package memmapdir

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEncodeKey(t *testing.T) {
	for _, tc := range []struct{ key, name string }{
		{"obs", "obs"},
		{"a_b-c.d", "a_b-c.d"},
		{"", "%"},
		{".", "%2E"},
		{"..", "%2E%2E"},
		{"...", "..."},
		{".hidden", ".hidden"},
		{"a/b/c", "a%2Fb%2Fc"},
		{"with space", "with%20space"},
		{"100%", "100%25"},
		{`<>:"|?*\`, "%3C%3E%3A%22%7C%3F%2A%5C"},
		{"nul\x00", "nul%00"},
		{"tab\tnl\n", "tab%09nl%0A"},
		{"del\x7f", "del%7F"},
		{"é∑日本", "é∑日本"},
		{"../../etc/passwd", "..%2F..%2Fetc%2Fpasswd"},
		{"C:payload", "C%3Apayload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.name, EncodeKey(tc.key))
			got, err := DecodeKey(tc.name)
			require.NoError(t, err)
			assert.Equal(t, tc.key, got)
		})
	}
}

func TestDecodeKeyRejectsNonCanonical(t *testing.T) {
	for _, name := range []string{
		"", ".", "..", "a/b", "a b", "%2", "%zz", "%2f", "%41", "%2Ea", "x%", "a%2",
	} {
		_, err := DecodeKey(name)
		assert.Error(t, err, "%q", name)
	}
}

func TestKeyPathStaysInside(t *testing.T) {
	dir := "/data/td"
	for _, key := range []string{"", ".", "..", "../x", "/abs", "a/../../b", "\x00", "ok"} {
		p := KeyPath(dir, key, "")
		assert.Equal(t, dir, filepath.Dir(p), "key %q gave %q", key, p)
		p = KeyPath(dir, key, ".memmap")
		assert.Equal(t, dir, filepath.Dir(p), "key %q gave %q", key, p)
	}
}

func TestLegacyName(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"obs", true}, {"with space", true}, {"a/b", false}, {`a\b`, false},
		{"", false}, {".", false}, {"..", false}, {"C:x", false}, {"1:x", true}, {"a\x00", false},
	} {
		_, ok := LegacyName(tc.key)
		assert.Equal(t, tc.ok, ok, "%q", tc.key)
	}
}

func FuzzKeyRoundTrip(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a/b", "%", "%25", "é", "a b", "\x7f", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		name := EncodeKey(key)
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			t.Fatalf("EncodeKey(%q) = %q is not a safe file name", key, name)
		}
		got, err := DecodeKey(name)
		if err != nil {
			t.Fatalf("DecodeKey(EncodeKey(%q)) failed: %v", key, err)
		}
		if got != key {
			t.Fatalf("round trip of %q gave %q", key, got)
		}
	})
}

func FuzzDecodeKey(f *testing.F) {
	for _, s := range []string{"%", "%2E", "%2E%2E", "a%2Fb", "%zz", "%4", "abc", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		key, err := DecodeKey(name)
		if err != nil {
			return
		}
		if back := EncodeKey(key); back != name {
			t.Fatalf("DecodeKey(%q) = %q, which encodes to %q", name, key, back)
		}
		if p := KeyPath("/d", key, ""); filepath.Dir(p) != "/d" {
			t.Fatalf("key %q escapes: %q", key, p)
		}
	})
}
