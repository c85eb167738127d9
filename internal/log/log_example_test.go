// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package log_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/tdmpi/tdmpi/internal/log"
)

func Example() {
	var buf bytes.Buffer
	log.SetOutput(&buf)
	defer log.SetOutput(os.Stderr)
	log.SetLevel(zerolog.InfoLevel) // what TDMPI_LOG=info does
	log.SetRankSize(1, 2)           // what group.Init does

	log.Logger().Info().Int("bytes", 64).Msg("sent")

	var line struct {
		Level   string
		Rank    int
		Size    int
		Bytes   int
		Message string
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%+v\n", line)
	// Output:
	// {Level:info Rank:1 Size:2 Bytes:64 Message:sent}
}
