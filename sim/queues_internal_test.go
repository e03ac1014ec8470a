package sim

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestJain(t *testing.T) {
	cases := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"equal", []float64{1, 1, 1}, 1},
		{"equal multiples", []float64{0.5, 0.5}, 1},
		{"one of two", []float64{2, 0}, 0.5},
		{"uneven", []float64{2, 1}, 9.0 / 10},
		{"three", []float64{1, 2, 3}, 36.0 / 42},
		{"none", nil, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.InDelta(t, tc.want, jain(tc.xs), 1e-12)
		})
	}
}
