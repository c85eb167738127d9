// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package torchwire

import "fmt"

// The opcodes the decoder accepts (protocols 2 to 5), named as Python's
// pickletools names them.
const (
	opMark            = '('
	opStop            = '.'
	opEmptyDict       = '}'
	opEmptyList       = ']'
	opEmptyTuple      = ')'
	opSetItem         = 's'
	opSetItems        = 'u'
	opAppend          = 'a'
	opAppends         = 'e'
	opTuple           = 't'
	opTuple1          = 0x85
	opTuple2          = 0x86
	opTuple3          = 0x87
	opMemoize         = 0x94
	opBinPut          = 'q'
	opLongBinPut      = 'r'
	opBinGet          = 'h'
	opLongBinGet      = 'j'
	opShortBinUnicode = 0x8c
	opBinUnicode      = 'X'
	opBinUnicode8     = 0x8d
	opBinInt          = 'J'
	opBinInt1         = 'K'
	opBinInt2         = 'M'
	opLong1           = 0x8a
	opBinFloat        = 'G'
	opNone            = 'N'
	opNewTrue         = 0x88
	opNewFalse        = 0x89
	opProto           = 0x80
	opFrame           = 0x95
)

// opNames names every opcode of pickle protocols 0 to 5.
var opNames = map[byte]string{
	'(': "MARK", '.': "STOP", '0': "POP", '1': "POP_MARK", '2': "DUP", 'F': "FLOAT", 'I': "INT",
	'J': "BININT", 'K': "BININT1", 'L': "LONG", 'M': "BININT2", 'N': "NONE", 'P': "PERSID",
	'Q': "BINPERSID", 'R': "REDUCE", 'S': "STRING", 'T': "BINSTRING", 'U': "SHORT_BINSTRING",
	'V': "UNICODE", 'X': "BINUNICODE", 'a': "APPEND", 'b': "BUILD", 'c': "GLOBAL", 'd': "DICT",
	'}': "EMPTY_DICT", 'e': "APPENDS", 'g': "GET", 'h': "BINGET", 'i': "INST", 'j': "LONG_BINGET",
	'l': "LIST", ']': "EMPTY_LIST", 'o': "OBJ", 'p': "PUT", 'q': "BINPUT", 'r': "LONG_BINPUT",
	's': "SETITEM", 't': "TUPLE", ')': "EMPTY_TUPLE", 'u': "SETITEMS", 'G': "BINFLOAT",
	0x80: "PROTO", 0x81: "NEWOBJ", 0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4", 0x85: "TUPLE1",
	0x86: "TUPLE2", 0x87: "TUPLE3", 0x88: "NEWTRUE", 0x89: "NEWFALSE", 0x8a: "LONG1", 0x8b: "LONG4",
	'B': "BINBYTES", 'C': "SHORT_BINBYTES", 0x8c: "SHORT_BINUNICODE", 0x8d: "BINUNICODE8",
	0x8e: "BINBYTES8", 0x8f: "EMPTY_SET", 0x90: "ADDITEMS", 0x91: "FROZENSET", 0x92: "NEWOBJ_EX",
	0x93: "STACK_GLOBAL", 0x94: "MEMOIZE", 0x95: "FRAME", 0x96: "BYTEARRAY8", 0x97: "NEXT_BUFFER",
	0x98: "READONLY_BUFFER",
}

// OpName returns the pickletools name of opcode op, or "unknown opcode"
// for a byte that is no opcode.
func OpName(op byte) string {
	if n, ok := opNames[op]; ok {
		return n
	}
	return fmt.Sprintf("unknown opcode %q", rune(op))
}
