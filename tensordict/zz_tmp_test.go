package tensordict

import "testing"

func BenchmarkTmpConsOnly(b *testing.B) {
	g := benchGroup(b, 2)
	if g.Rank() > 1 {
		return
	}
	td := consolidatedTD(b, 16, 64)
	f := pingPong(g, func(p int) error { return td.Send(p, WithConsolidated(), WithGroup(g)) },
		func(p int) error { _, err := td.Recv(p, WithConsolidated(), WithGroup(g)); return err })
	for range b.N {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
}
