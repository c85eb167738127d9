// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package wire_test

import (
	"encoding/binary"
	"fmt"

	"github.com/tdmpi/tdmpi/internal/wire"
)

func Example() {
	h := wire.Header{Kind: wire.KindInit, Hash: 0x1234, Leaves: 3}
	msg := wire.AppendFrame(nil, &h, "", []byte(`{"cls":"TensorDict"}`), make([]byte, 32))
	f, err := wire.ParseFrame(msg, wire.Limits{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Kind, f.Total, string(f.Meta), len(f.Inline))

	// A peer claiming a terabyte is refused before anything is allocated.
	binary.LittleEndian.PutUint64(msg[8:], 1<<40)
	_, err = wire.Parse(msg, wire.Limits{MaxTotal: 64 << 30})
	fmt.Println(err)
	// Output:
	// init 32 {"cls":"TensorDict"} 32
	// wire: header total 1099511627776 bytes exceeds the limit of 68719476736 bytes
}
