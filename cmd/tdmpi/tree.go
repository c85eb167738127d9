// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
)

// maxValueRunes bounds the width of a non-tensor value in the text tree.
const maxValueRunes = 60

// writeText prints rep as a tree of entries under a summary line:
//
//	testdata/mmap_example: memmap, batch size [2 1], 2 tensor leaves, 20 B
//	KEY           TYPE        SHAPE  BYTES  VALUES
//	nested        TensorDict  [2 1]
//	├── int64     int64       [2 1]  16 B   [1, 2]
//	├── string    non-tensor                ["a string!"]
//	└── bfloat16  bfloat16    [2 1]  4 B    [1, 1]
func (rep *inspectReport) writeText(w io.Writer) error {
	root := rep.Root
	leaves := "tensor leaves"
	if rep.Leaves == 1 {
		leaves = "tensor leaf"
	}
	class := ""
	if root.Class != "" {
		class = ", tensorclass " + root.Class
	}
	if _, err := fmt.Fprintf(w, "%s: %s%s, batch size %v, %d %s, %s\n",
		rep.Path, rep.Format, class, root.BatchSize, rep.Leaves, leaves, formatSize(rep.Bytes)); err != nil {
		return err
	}
	if len(root.Entries) == 0 {
		_, err := fmt.Fprintln(w, "(no entries)")
		return err
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tTYPE\tSHAPE\tBYTES\tVALUES")
	writeEntries(tw, root.Entries, "", true)
	if err := tw.Flush(); err != nil {
		return err
	}
	// Every row has every cell, so that columns align across nested
	// TensorDicts; the padding of empty trailing cells is dropped.
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// writeEntries writes one row per entry, and the rows of nested
// TensorDicts below their entry. indent is the tree drawing that precedes
// the entries' branches; top is true for the root's own entries, which
// have no branch.
func writeEntries(w io.Writer, entries []entry, indent string, top bool) {
	for i, e := range entries {
		last := i == len(entries)-1
		branch, childIndent := "", ""
		if !top {
			branch, childIndent = "├── ", "│   "
			if last {
				branch, childIndent = "└── ", "    "
			}
		}
		key := indent + branch + displayKey(e.Key)
		switch e.Kind {
		case kindTensor:
			vals := ""
			if e.Truncated != nil {
				vals = formatValues(e.Values, *e.Truncated)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", key, e.DType, formatShape(e.Shape), formatSize(*e.Bytes), vals)
		case kindTensorDict:
			typ := "TensorDict"
			if e.Node.Class != "" {
				typ = e.Node.Class + " (tensorclass)"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t\t\n", key, typ, formatShape(e.Node.BatchSize))
			writeEntries(w, e.Node.Entries, indent+childIndent, false)
		case kindNonTensor:
			fmt.Fprintf(w, "%s\tnon-tensor\t\t\t%s\n", key, truncateRunes(string(e.Value), maxValueRunes))
		}
	}
}

// formatShape formats a shape as "[2 1]"; a scalar's is "[]".
func formatShape(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// displayKey returns k as is when it prints safely in a column, and
// quoted otherwise (empty, with spaces, tabs, control or unprintable
// characters, or quotes).
func displayKey(k string) string {
	if k == "" || strings.ContainsAny(k, "\"\\") {
		return strconv.Quote(k)
	}
	for _, r := range k {
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return strconv.Quote(k)
		}
	}
	return k
}

// truncateRunes shortens s to at most n runes, ending it with "..." when
// it was cut. It also replaces tabs and newlines, which would break the
// table's columns.
func truncateRunes(s string, n int) string {
	s = strings.NewReplacer("\t", `\t`, "\n", `\n`, "\r", `\r`).Replace(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-3]) + "..."
}
