package assess

import (
	"fmt"
	"math"
	"slices"
)

// positive reports whether x is a finite number > 0.
func positive(x float64) bool { return x > 0 && !math.IsInf(x, 1) }

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// median of xs (not empty); xs is not modified.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// golden minimises f on [a, b] by golden-section search (f unimodal
// there), in iters steps, and returns the best point it evaluated.
func golden(f func(float64) float64, a, b float64, iters int) float64 {
	const r = 0.6180339887498949 // (sqrt(5)-1)/2
	c, d := b-r*(b-a), a+r*(b-a)
	fc, fd := f(c), f(d)
	for range iters {
		if fc <= fd {
			b, d, fd = d, c, fc
			c = b - r*(b-a)
			fc = f(c)
		} else {
			a, c, fc = c, d, fd
			d = a + r*(b-a)
			fd = f(d)
		}
	}
	if fc <= fd {
		return c
	}
	return d
}

// line fits y = a + b*x by least squares; ok is false when the x are all
// equal (or fewer than two).
func line(xs, ys []float64) (a, b float64, ok bool) {
	n := float64(len(xs))
	if len(xs) < 2 {
		return 0, 0, false
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= n
	my /= n
	var sxx, sxy float64
	for i := range xs {
		dx := xs[i] - mx
		sxx += dx * dx
		sxy += dx * (ys[i] - my)
	}
	if !(sxx > 0) {
		return 0, 0, false
	}
	b = sxy / sxx
	return my - b*mx, b, true
}

// num formats a measured quantity for a Reason: "540", "12.5", "0.931",
// "1.2e-05".
func num(x float64) string {
	switch ax := math.Abs(x); {
	case ax >= 100 && ax < 1e7:
		return fmt.Sprintf("%.0f", x)
	default:
		return fmt.Sprintf("%.3g", x)
	}
}

// amount formats an amount of work: "950", "12.3k", "4.52M", "1.1G".
func amount(x float64) string {
	switch ax := math.Abs(x); {
	case ax >= 1e9:
		return fmt.Sprintf("%.3gG", x/1e9)
	case ax >= 1e6:
		return fmt.Sprintf("%.3gM", x/1e6)
	case ax >= 1e4:
		return fmt.Sprintf("%.3gk", x/1e3)
	default:
		return fmt.Sprintf("%.0f", x)
	}
}
