package tensor

import "testing"

const benchN = 1 << 20

func BenchmarkContiguousOfExpanded(b *testing.B) {
	col := Ones(Float32, 1024, 1)
	e, err := col.Expand(1024, 1024)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchN * 4)
	for b.Loop() {
		_ = e.Contiguous()
	}
}

func BenchmarkContiguousOfTransposed(b *testing.B) {
	x := Ones(Float32, 1024, 1024)
	tr, _ := x.Transpose(0, 1)
	b.SetBytes(benchN * 4)
	for b.Loop() {
		_ = tr.Contiguous()
	}
}

func BenchmarkToFloat16(b *testing.B) {
	x := Ones(Float32, benchN)
	b.SetBytes(benchN * 4)
	for b.Loop() {
		_ = x.To(Float16)
	}
}

func BenchmarkAddFloat64(b *testing.B) {
	x, y := Ones(Float64, benchN), Ones(Float64, benchN)
	b.SetBytes(benchN * 8)
	for b.Loop() {
		if _, err := x.Add(y); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAddFloat64Broadcast(b *testing.B) {
	x, row := Ones(Float64, 1024, 1024), Ones(Float64, 1024)
	b.SetBytes(benchN * 8)
	for b.Loop() {
		if _, err := x.Add(row); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAddInPlaceFloat64(b *testing.B) {
	x, y := Ones(Float64, benchN), Ones(Float64, benchN)
	b.SetBytes(benchN * 8)
	for b.Loop() {
		if err := x.AddInPlace(y); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAddFloat32(b *testing.B) {
	x, y := Ones(Float32, benchN), Ones(Float32, benchN)
	b.SetBytes(benchN * 4)
	for b.Loop() {
		if _, err := x.Add(y); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEqScalarFloat32(b *testing.B) {
	x := Ones(Float32, benchN)
	b.SetBytes(benchN * 4)
	for b.Loop() {
		_ = x.EqScalar(1)
	}
}

func BenchmarkSumFloat32(b *testing.B) {
	x := Ones(Float32, benchN)
	b.SetBytes(benchN * 4)
	for b.Loop() {
		_ = x.Sum()
	}
}
