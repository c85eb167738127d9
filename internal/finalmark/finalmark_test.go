// Copyright ©2026 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package finalmark

import (
	"bytes"
	"os"
	"testing"
)

func TestPrint(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want string
	}{
		{"1", Mark + " (rank 1 of 4)\n"},
		{"", ""},
		{"0", ""},
		{"yes", ""},
	} {
		t.Setenv(Env, tc.env)
		var b bytes.Buffer
		Print(&b, 1, 4)
		if got := b.String(); got != tc.want {
			t.Errorf("%s=%q: Print wrote %q, want %q", Env, tc.env, got, tc.want)
		}
	}
}

// TestScriptMark checks that the launcher wrapper looks for the same mark.
func TestScriptMark(t *testing.T) {
	const script = "../../hpc/scripts/mpich-exec.sh"
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if want := "mark='" + Mark + "'"; !bytes.Contains(b, []byte(want)) {
		t.Errorf("%s does not set %s", script, want)
	}
	if !bytes.Contains(b, []byte(Env+"=1")) {
		t.Errorf("%s does not set %s=1", script, Env)
	}
}
