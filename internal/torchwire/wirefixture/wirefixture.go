// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package wirefixture reads the recorded torch-wire transcripts in
// internal/torchwire/testdata/torch-wire: what Python tensordict 0.14
// sent in init_remote, message by message, and the TensorDict it sent. It
// is for tests only.
package wirefixture

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
)

// Dir returns the directory of the transcripts.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "torch-wire")
}

// Case is one recorded case.
type Case struct {
	Name  string
	TD    TensorDict
	Modes map[string]*Mode // "p2p" and "bcast"
}

// TensorDict is the TensorDict a case sent, independent of the wire.
type TensorDict struct {
	Class      string      `json:"class"`
	BatchSize  []int       `json:"batch_size"`
	Names      []*string   `json:"names"`
	Locked     bool        `json:"locked"`
	Leaves     []Leaf      `json:"leaves"`
	NonTensors []NonTensor `json:"non_tensors"`
	Nodes      []Node      `json:"nodes"`
}

// Leaf is one tensor leaf, in storage order.
type Leaf struct {
	Key    []string `json:"key"`
	DType  string   `json:"dtype"`
	Shape  []int    `json:"shape"`
	NBytes int      `json:"nbytes"`
	SHA256 string   `json:"sha256"`
	Hex    *string  `json:"hex"`
}

// Bytes returns the leaf's raw bytes, or nil when the manifest gives only
// a hash.
func (l *Leaf) Bytes() ([]byte, error) {
	if l.Hex == nil {
		return nil, nil
	}
	return hex.DecodeString(*l.Hex)
}

// NonTensor is one non-tensor value.
type NonTensor struct {
	Key       []string `json:"key"`
	Value     any      `json:"value"`
	BatchSize []int    `json:"batch_size"`
}

// Node is one nested TensorDict.
type Node struct {
	Key       []string  `json:"key"`
	BatchSize []int     `json:"batch_size"`
	Names     []*string `json:"names"`
	Locked    bool      `json:"locked"`
}

// Message is one recorded message.
type Message struct {
	Index    int    `json:"index"`
	Call     string `json:"call"`
	Comm     string `json:"comm"`
	Datatype string `json:"datatype"`
	TypeSize int    `json:"type_size"`
	Count    int64  `json:"count"`
	Bytes    int64  `json:"bytes"`
	File     string `json:"file"`
	Src      *int   `json:"src"`
	Dest     *int   `json:"dest"`
	Tag      *int   `json:"tag"`
	Root     *int   `json:"root"`
}

// Call is one MPI call of a rank.
type Call struct {
	Fn       string `json:"fn"`
	Comm     string `json:"comm"`
	Datatype string `json:"datatype"`
	Count    int64  `json:"count"`
	Tag      *int   `json:"tag"`
	File     string `json:"file"`
}

// Mode is one mode of a case: the messages, their payloads, the metadata
// (JSON, tuples as lists; nil for case "wide") and both ranks' calls.
type Mode struct {
	Messages      []Message `json:"messages"`
	Metadata      any       `json:"-"`
	Payload       [3][]byte `json:"-"`
	SenderCalls   []Call    `json:"sender_calls"`
	ReceiverCalls []Call    `json:"receiver_calls"`
}

type manifest struct {
	TD    TensorDict                 `json:"tensordict"`
	Modes map[string]json.RawMessage `json:"modes"`
}

// Load reads every case, in the order of index.json.
func Load() ([]*Case, error) {
	dir := Dir()
	raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return nil, err
	}
	var index struct {
		Cases map[string]json.RawMessage `json:"cases"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	var cases []*Case
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range index.Cases {
			if !yield(k) {
				return
			}
		}
	}) {
		c, err := load(dir, name)
		if err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	return cases, nil
}

func load(dir, name string) (*Case, error) {
	raw, err := os.ReadFile(filepath.Join(dir, name, "manifest.json"))
	if err != nil {
		return nil, err
	}
	var m manifest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s/manifest.json: %w", name, err)
	}
	for i := range m.TD.NonTensors {
		m.TD.NonTensors[i].Value = Numbers(m.TD.NonTensors[i].Value)
	}
	c := &Case{Name: name, TD: m.TD, Modes: map[string]*Mode{}}
	for mode, r := range m.Modes {
		md := &Mode{}
		if err := json.Unmarshal(r, md); err != nil {
			return nil, fmt.Errorf("%s/manifest.json: mode %s: %w", name, mode, err)
		}
		var meta struct {
			Metadata json.RawMessage `json:"metadata"`
		}
		if err := json.Unmarshal(r, &meta); err != nil {
			return nil, err
		}
		if len(meta.Metadata) > 0 && meta.Metadata[0] == '{' {
			dec := json.NewDecoder(bytes.NewReader(meta.Metadata))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				return nil, err
			}
			md.Metadata = Numbers(v)
		}
		for i := range md.Payload {
			p, err := os.ReadFile(filepath.Join(dir, name, fmt.Sprintf("%s.%d.bin", mode, i)))
			if err != nil {
				return nil, err
			}
			md.Payload[i] = p
		}
		c.Modes[mode] = md
	}
	return c, nil
}

// Numbers replaces the json.Numbers of v by int64 or float64.
func Numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = Numbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = Numbers(x[k])
		}
	}
	return v
}
