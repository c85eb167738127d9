// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

// A node finds its entries by name through index, a map from names to
// positions in entries, once it has indexMin entries; smaller nodes, the
// common case, are searched in order, which is as fast and saves building a
// map for every node of every TensorDict received or rebuilt. Only writes
// create the map, so concurrent reads stay safe.

// indexMin is the number of entries from which a node keeps an index map.
const indexMin = 9

// lookup returns the position of the entry called name in td.entries.
func (td *TensorDict) lookup(name string) (int, bool) {
	if td.index != nil {
		j, ok := td.index[name]
		return j, ok
	}
	for i := range td.entries {
		if td.entries[i].name == name {
			return i, true
		}
	}
	return -1, false
}

// appendEntry adds e, whose name td does not hold yet, after the others.
func (td *TensorDict) appendEntry(e entry) {
	td.entries = append(td.entries, e)
	switch n := len(td.entries); {
	case td.index != nil:
		td.index[e.name] = n - 1
	case n >= indexMin:
		td.index = make(map[string]int, 2*n)
		for i := range td.entries {
			td.index[td.entries[i].name] = i
		}
	}
}

// removeEntry deletes entry j, keeping the others in order.
func (td *TensorDict) removeEntry(j int) {
	name := td.entries[j].name
	copy(td.entries[j:], td.entries[j+1:])
	td.entries[len(td.entries)-1] = entry{}
	td.entries = td.entries[:len(td.entries)-1]
	if td.index == nil {
		return
	}
	delete(td.index, name)
	for i := j; i < len(td.entries); i++ {
		td.index[td.entries[i].name] = i
	}
}
