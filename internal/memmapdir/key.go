package memmapdir

import (
	"fmt"
	"path/filepath"
	"strings"
)

// hexDigits are the upper-case digits EncodeKey writes.
const hexDigits = "0123456789ABCDEF"

// mustEscape reports whether EncodeKey writes byte c as %XX: the characters
// that are unsafe in a file name on some system (/ < > : " | ? * \ and
// space), '%' itself, NUL and the other C0 controls, and DEL.
func mustEscape(c byte) bool {
	switch c {
	case '/', '<', '>', ':', '"', '|', '?', '*', '\\', ' ', '%':
		return true
	}
	return c < 0x20 || c == 0x7f
}

// EncodeKey returns the file-system name tensordict (0.13 and later) gives the
// entry key: every character in / < > : " | ? * \ space % NUL, every other C0
// control and DEL becomes %XX with upper-case hex digits; everything else,
// non-ASCII UTF-8 included, is kept. The empty key becomes "%", and "." and
// ".." become "%2E" and "%2E%2E".
//
// The result is never empty, ".", ".." nor contains a slash or NUL, so
// joining it to a directory always names an entry of that directory.
func EncodeKey(key string) string {
	switch key {
	case "":
		return "%"
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	n := 0
	for i := 0; i < len(key); i++ {
		if mustEscape(key[i]) {
			n++
		}
	}
	if n == 0 {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 2*n)
	for i := 0; i < len(key); i++ {
		c := key[i]
		if mustEscape(c) {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// DecodeKey returns the key that EncodeKey encodes as name. It accepts only
// names EncodeKey can produce (upper-case %XX escapes of the escaped
// characters, "%", "%2E" and "%2E%2E"), so that EncodeKey(DecodeKey(name))
// == name whenever DecodeKey succeeds; anything else is an error. Legacy,
// unencoded file names are matched from the key side instead (see
// LegacyName).
func DecodeKey(name string) (string, error) {
	switch name {
	case "%":
		return "", nil
	case "%2E":
		return ".", nil
	case "%2E%2E":
		return "..", nil
	case "", ".", "..":
		return "", fmt.Errorf("memmap: DecodeKey: %q is not an encoded key", name)
	}
	if !strings.Contains(name, "%") {
		for i := 0; i < len(name); i++ {
			if mustEscape(name[i]) {
				return "", fmt.Errorf("memmap: DecodeKey: %q has unescaped byte %#02x at %d", name, name[i], i)
			}
		}
		return name, nil
	}
	b := make([]byte, 0, len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '%' {
			if mustEscape(c) {
				return "", fmt.Errorf("memmap: DecodeKey: %q has unescaped byte %#02x at %d", name, c, i)
			}
			b = append(b, c)
			continue
		}
		if i+2 >= len(name) {
			return "", fmt.Errorf("memmap: DecodeKey: %q has a truncated escape at %d", name, i)
		}
		hi, lo := strings.IndexByte(hexDigits, name[i+1]), strings.IndexByte(hexDigits, name[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("memmap: DecodeKey: %q has a bad escape %q at %d", name, name[i:i+3], i)
		}
		d := byte(hi<<4 | lo)
		if !mustEscape(d) {
			return "", fmt.Errorf("memmap: DecodeKey: %q escapes %q, which is never escaped", name, string(rune(d)))
		}
		b = append(b, d)
		i += 2
	}
	return string(b), nil
}

// LegacyName returns the unencoded file name that tensordict before 0.13 used
// for key, and whether it is safe to look for: a legacy name must stay inside
// its directory, so keys holding a slash, a backslash or NUL, keys starting
// with a drive letter ("C:"), and "", "." and ".." have none. A loader tries
// it when the encoded name is missing.
func LegacyName(key string) (string, bool) {
	if key == "" || key == "." || key == ".." || strings.ContainsAny(key, "/\\\x00") {
		return "", false
	}
	if len(key) >= 2 && key[1] == ':' && (key[0]|0x20 >= 'a' && key[0]|0x20 <= 'z') {
		return "", false
	}
	return key, true
}

// KeyPath returns the path of entry key inside dir, with suffix appended to
// the encoded name (".memmap" for a tensor leaf, "" for a nested
// collection). The result is always an entry of dir, whatever key holds.
func KeyPath(dir, key, suffix string) string {
	return filepath.Join(dir, EncodeKey(key)+suffix)
}
