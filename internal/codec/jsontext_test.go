//go:build goexperiment.jsonv2

package codec

import (
	"bytes"
	"encoding/json/jsontext"
	"errors"
	"fmt"
	"io"
	"testing"
	"unicode/utf8"
)

// jsontextTokenizer is jsontext's Decoder (the tokenizer of encoding/json/v2
// and of github.com/go-json-experiment/json), with duplicate names allowed
// as the format allows them (a repeated leaf name is refused later, when
// the TensorDict is built).
type jsontextTokenizer struct{ dec *jsontext.Decoder }

func (z *jsontextTokenizer) next() (byte, string, error) {
	t, err := z.dec.ReadToken()
	if err != nil {
		return 0, "", err
	}
	switch k := t.Kind(); k {
	case '"', '0':
		return byte(k), t.String(), nil
	default:
		return byte(k), "", nil
	}
}

func (z *jsontextTokenizer) more() bool {
	k := z.dec.PeekKind()
	return k != ']' && k != '}' && k != 0
}

func (z *jsontextTokenizer) end() error {
	if _, err := z.dec.ReadToken(); err != io.EOF {
		return fmt.Errorf("trailing data: %v: %w", err, errOracle)
	}
	return nil
}

// jsontextDecode decodes meta as Decode does, with jsontext.
func jsontextDecode(meta []byte, stLen int, lim Limits) (*Node, string, error) {
	// Like encoding/json with AllowInvalidUTF8, jsontext then turns lone
	// surrogate escapes into U+FFFD, as the format does, but also invalid
	// bytes, which the format refuses.
	if !utf8.Valid(meta) {
		return nil, "", errors.New("invalid UTF-8")
	}
	dec := jsontext.NewDecoder(bytes.NewReader(meta), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	return decodeWith(&jsontextTokenizer{dec}, meta, stLen, lim)
}

func init() {
	readers = append(readers, reader{"jsontext", func(meta []byte, stLen int) error {
		_, _, err := jsontextDecode(meta, stLen, DefaultLimits())
		return err
	}})
	alternatives = append(alternatives, jsontextDecode)
}

// FuzzJSONTextMatchesDecode checks the jsontext-based decoder against
// Decode, as FuzzDecodeMatchesOracle does the encoding/json one.
func FuzzJSONTextMatchesDecode(f *testing.F) {
	for _, meta := range tricky {
		f.Add([]byte(meta), uint16(64))
	}
	lim := Limits{MaxDepth: DefaultMaxDepth, MaxEntries: 4096, MaxMetadataBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, meta []byte, stLen uint16) {
		_, _, err := Decode(meta, int(stLen), lim)
		_, _, jerr := jsontextDecode(meta, int(stLen), lim)
		if (err == nil) != (jerr == nil) {
			t.Fatalf("verdicts differ:\ndecode: %v\njsontext: %v\nmeta: %.300q", err, jerr, meta)
		}
	})
}
