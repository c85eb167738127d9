// Package jsonesc writes JSON string literals: the one string escaper of
// tdmpi's JSON writers, shared by the consolidated-metadata codec
// (internal/codec, UTF-8 kept as it is) and memmap's meta.json writer
// (non-ASCII escaped as \uXXXX, as Python's json.dumps does by default).
//
// escape.go holds AppendString; escape_test.go checks it against
// encoding/json's reading of what it writes.
package jsonesc
