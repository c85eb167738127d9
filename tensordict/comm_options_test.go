// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// TestOptionFamiliesCompile type-checks calls that pass an option to a
// method of another family and expects each to fail to compile, and the
// calls beside them that are valid to compile.
func TestOptionFamiliesCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: runs go vet on generated programs")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipped: the go command is not on PATH")
	}
	wrong := map[string]string{
		"memmap_send":      `_ = td.Send(1, tensordict.WithMemmap("p"))`,
		"broadcast_send":   `_ = td.Send(1, tensordict.WithBroadcast())`,
		"memmap_recv":      `_, _ = td.Recv(1, tensordict.WithMemmap("p"))`,
		"memmap_bcast":     `_, _ = td.Broadcast(0, tensordict.WithMemmap("p"))`,
		"alloc_gather":     `_, _ = td.AllGather(tensordict.WithAllocator(nil))`,
		"tag_initremote":   `_ = td.InitRemote(1, tensordict.WithTag(3))`,
		"tag_allreduce":    `_ = td.AllReduce(tensordict.ReduceSum, tensordict.WithTag(3))`,
		"maxbytes_send":    `_ = td.Send(1, tensordict.WithMaxBytes(8))`,
		"broadcast_reduce": `_ = td.Reduce(0, tensordict.ReduceSum, tensordict.WithBroadcast())`,
	}
	right := `_ = td.Send(1, tensordict.WithGroup(g), tensordict.WithTag(3), tensordict.WithConsolidated())
	_, _ = td.Recv(1, tensordict.WithContext(ctx), tensordict.WithMaxBytes(8), tensordict.WithPseudoRandTags())
	_ = td.InitRemote(1, tensordict.WithBroadcast(), tensordict.WithGroup(g))
	_, _ = tensordict.FromRemoteInit(0, tensordict.WithMemmap("p"), tensordict.WithMaxBytes(8), tensordict.WithContext(ctx))
	_, _ = td.Broadcast(0, tensordict.WithConsolidated(), tensordict.WithMaxBytes(8))
	_ = td.AllReduce(tensordict.ReduceSum, tensordict.WithGroup(g), tensordict.WithContext(ctx))`
	dir, err := os.MkdirTemp(".", "optcheck")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	write := func(name, body string) string {
		d := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(d, 0o755))
		src := "package main\n\nimport (\n\t\"context\"\n\n\t\"github.com/tdmpi/tdmpi/group\"\n\t\"github.com/tdmpi/tdmpi/tensordict\"\n)\n\n" +
			"func main() {\n\tvar td *tensordict.TensorDict\n\tvar g *group.Group\n\tctx := context.Background()\n\t_, _ = g, ctx\n\t" + body + "\n}\n"
		require.NoError(t, os.WriteFile(filepath.Join(d, "main.go"), []byte(src), 0o644))
		return "./" + filepath.ToSlash(d)
	}
	pkgs := []string{write("right", right)}
	for name, body := range wrong {
		pkgs = append(pkgs, write(name, body))
	}
	out, _ := exec.Command(goBin, append([]string{"vet"}, pkgs...)...).CombinedOutput()
	text := string(out)
	assert.NotContains(t, text, filepath.Join(dir, "right")+string(filepath.Separator), "valid option uses must compile")
	for name := range wrong {
		assert.Contains(t, text, filepath.Join(dir, name, "main.go"), "%s must not compile", name)
	}
	if t.Failed() {
		t.Log(text)
	}
}

// TestOptionUnusedBySide checks that an option of a method's family that
// only the other side of the transfer uses is an error before anything is
// sent.
func TestOptionUnusedBySide(t *testing.T) {
	td := New(2)
	require.NoError(t, td.Set(K("a"), tensor.Ones(tensor.Float32, 2)))
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"memmap on InitRemote", func() error { return td.InitRemote(1, WithMemmap("x")) }, "WithMemmap has no use here: it configures the receiving side"},
		{"allocator on InitRemote", func() error {
			return td.InitRemote(1, WithAllocator(func(int) (*tensor.Storage, error) { return nil, nil }))
		}, "WithAllocator has no use here"},
		{"max bytes on AllReduce", func() error { return td.AllReduce(ReduceSum, WithMaxBytes(8)) }, "WithMaxBytes has no use here: this collective receives no structure"},
		{"max bytes on Send", func() error { return td.Send(1, asSend(WithMaxBytes(8))) }, "WithMaxBytes has no use here"},
		{"consolidated on Reduce", func() error { return td.Reduce(0, ReduceSum, WithConsolidated()) }, "WithConsolidated has no use here: only Broadcast and the point-to-point methods"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// asSend smuggles an option of another family into Send, as only code in
// this package can, to check the runtime guard behind the types.
func asSend(o LimitOption) SendOption { return o.(option) }

// TestErrorsIs checks the sentinels users test for: a collective's
// structure error is a mismatch like Recv's, and a refused size is ErrLimit
// however it was refused.
func TestErrorsIs(t *testing.T) {
	td := New(2)
	require.NoError(t, td.Set(K("a", "b"), tensor.Ones(tensor.Float32, 2)))
	c, err := td.Consolidate()
	require.NoError(t, err)
	meta, err := c.ConsolidatedMetadata()
	require.NoError(t, err)
	st := c.ConsolidatedStorage()

	_, errMeta := FromConsolidated(st, meta, WithMaxMetadataBytes(8))
	_, errDepth := FromConsolidated(st, meta, WithMaxDepth(1))
	_, errEntries := FromConsolidated(st, meta, WithMaxEntries(1))
	cases := []struct {
		name   string
		err    error
		target error
	}{
		{"collective structure error", fmt.Errorf("tensordict: AllReduce: %w", &StructureError{Op: "AllReduce", Key: K("a")}), ErrMismatch},
		{"metadata over WithMaxMetadataBytes", errMeta, ErrLimit},
		{"metadata deeper than WithMaxDepth", errDepth, ErrLimit},
		{"more entries than WithMaxEntries", errEntries, ErrLimit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, tc.err)
			assert.ErrorIs(t, tc.err, tc.target)
		})
	}
}
