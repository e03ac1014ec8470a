package assess

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFitCurveSame: fitCurve gives bit for bit what the plain version
// below (fitCurveRef: line for each tau, no memo) gives, on curves, lines,
// noise, constants and duplicate xs.
func TestFitCurveSame(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 18))
	for round := range 2000 {
		n := 2 + r.IntN(200)
		xs, ys := make([]float64, n), make([]float64, n)
		x := r.Float64() * 1e6
		a, b, tau := r.Float64(), r.Float64(), math.Exp(r.Float64()*10)
		for i := range xs {
			x += r.ExpFloat64() * 1e4
			if r.IntN(10) == 0 && i > 0 {
				x = xs[i-1] // a duplicate x
			}
			xs[i] = x
			switch round % 4 {
			case 0:
				ys[i] = a - b*math.Exp(-x/tau/1e4) + 0.01*r.NormFloat64()
			case 1:
				ys[i] = a + b*x
			case 2:
				ys[i] = r.NormFloat64()
			default:
				ys[i] = a
			}
		}
		if xs[0] == xs[n-1] {
			continue
		}
		got, want := fitCurve(xs, ys), fitCurveRef(xs, ys)
		same := func(p, q float64) bool {
			return math.Float64bits(p) == math.Float64bits(q) || (math.IsNaN(p) && math.IsNaN(q))
		}
		if !same(got.A, want.A) || !same(got.B, want.B) || !same(got.Tau, want.Tau) || !same(got.X0, want.X0) || !same(got.R2, want.R2) || got.Edge != want.Edge {
			t.Fatalf("round %d: fitCurve = %+v, want %+v", round, got, want)
		}
	}
}

// fitCurveRef is fitCurve as it was before it inlined line and kept the
// last fits.
func fitCurveRef(xs, ys []float64) curve {
	x0, x1 := xs[0], xs[0]
	for _, x := range xs {
		x0, x1 = min(x0, x), max(x1, x)
	}
	span := x1 - x0
	var my float64
	for _, y := range ys {
		my += y
	}
	my /= float64(len(ys))
	var sst float64
	for _, y := range ys {
		sst += (y - my) * (y - my)
	}
	e := make([]float64, len(xs))
	// fit returns A, B and the squared error at tau = exp(lt) spans.
	fit := func(lt float64) (a, b, sse float64) {
		tau := math.Exp(lt)
		for i, x := range xs {
			e[i] = math.Exp(-(x - x0) / span / tau)
		}
		c0, c1, ok := line(e, ys)
		if !ok || c1 >= 0 { // y = c0 + c1*e: B = -c1 must be > 0
			return my, 0, sst
		}
		for i, y := range ys {
			d := y - (c0 + c1*e[i])
			sse += d * d
		}
		return c0, -c1, sse
	}
	const steps = 60
	lo, hi := math.Log(0.01), math.Log(10)
	at := func(k int) float64 { return lo + (hi-lo)*float64(k)/steps }
	bestK, bestE := 0, math.Inf(1)
	for k := 0; k <= steps; k++ {
		if _, _, sse := fit(at(k)); sse < bestE {
			bestK, bestE = k, sse
		}
	}
	lt := golden(func(lt float64) float64 { _, _, s := fit(lt); return s },
		at(max(0, bestK-1)), at(min(steps, bestK+1)), 40)
	if _, _, s := fit(lt); s > bestE {
		lt = at(bestK)
	}
	a, b, sse := fit(lt)
	c := curve{A: a, B: b, Tau: math.Exp(lt) * span, X0: x0, Edge: bestK == steps}
	if sst > 0 {
		c.R2 = 1 - sse/sst
	}
	return c
}
