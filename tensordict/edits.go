// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

// An editMark is a tree's nodes, depth first, with the edit count of each
// (see TensorDict.edited) as they were when it was recorded: what a call
// keeps of a TensorDict to learn, at the next call, whether anything it
// worked out of the tree's entries still holds (the transfer state, see
// p2pState.refresh).
type editMark struct {
	nodes []*TensorDict
	edits []uint64
}

// record records td's nodes and their edit counts, reusing m's memory.
func (m *editMark) record(td *TensorDict) {
	clear(m.nodes[:cap(m.nodes)]) // no stale node stays reachable from m
	m.nodes, m.edits = appendNodes(m.nodes[:0], td), m.edits[:0]
	for _, n := range m.nodes {
		m.edits = append(m.edits, n.edits)
	}
}

// unedited reports whether no node of td was edited since m recorded
// their counts: then td holds the same entries (the same tensors, nested
// nodes and non-tensor values, though a composite value may have been
// changed in place), batch sizes, lock states and class names. It reads
// the nodes m recorded, not td's entries: a node that gained, lost or
// replaced a child was edited itself, so while no count has moved, the
// recorded nodes are still td's tree (16 leaves in one node: one
// comparison, not a walk of 16 entries).
func (m *editMark) unedited(td *TensorDict) bool {
	if len(m.nodes) == 0 || m.nodes[0] != td {
		return false
	}
	for i, n := range m.nodes {
		if n.edits != m.edits[i] {
			return false
		}
	}
	return true
}

// appendNodes appends td and its nodes, depth first.
func appendNodes(dst []*TensorDict, td *TensorDict) []*TensorDict {
	dst = append(dst, td)
	for i := range td.entries {
		if e := &td.entries[i]; e.kind == kindTD {
			dst = appendNodes(dst, e.td)
		}
	}
	return dst
}
