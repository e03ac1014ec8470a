package sim

import (
	"bufio"
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// checkDelaunay checks that the live tetrahedra are positively oriented,
// have no point in their (perturbed) circumspheres, and fill volume6 (6
// times the hull's volume).
func checkDelaunay(t *testing.T, tri *triangulation, volume6 int64) {
	t.Helper()
	total := int64(0)
	for _, tt := range tri.tets {
		if tt.dead || tt.v[0] < 0 || tt.v[1] < 0 || tt.v[2] < 0 || tt.v[3] < 0 {
			continue
		}
		o := tri.orient(tt.v)
		must.Positive(t, o)
		total += o
		for p := range tri.pts {
			q := [5]int32{tt.v[0], tt.v[1], tt.v[2], tt.v[3], int32(p)}
			if p != int(q[0]) && p != int(q[1]) && p != int(q[2]) && p != int(q[3]) {
				must.Negative(t, tri.inSphere(q), must.Sprintf("point %v in the sphere of %v", tri.pts[p], tt.v))
			}
		}
	}
	must.Eq(t, volume6, total)
}

// lattice is the points of a box of integer sizes, every coordinate a
// multiple of step; as degenerate as it gets (every cell is cospherical).
func lattice(nx, ny, nz, step int64) []ipoint {
	var pts []ipoint
	for x := int64(0); x <= nx; x++ {
		for y := int64(0); y <= ny; y++ {
			for z := int64(0); z <= nz; z++ {
				pts = append(pts, ipoint{x * step, y * step, z * step})
			}
		}
	}
	return pts
}

func TestTriangulation_Lattice(t *testing.T) {
	pts := lattice(3, 4, 2, 1)
	tri, err := newTriangulation(pts)
	must.NoError(t, err)
	checkDelaunay(t, tri, 6*3*4*2)
}

func TestTriangulation_RandomInBox(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		// A box's corners, so the hull is the box, and points inside,
		// many on the same planes.
		pts := []ipoint{{0, 0, 0}, {0, 0, 60}, {0, 60, 0}, {0, 60, 60}, {60, 0, 0}, {60, 0, 60}, {60, 60, 0}, {60, 60, 60}}
		seen := map[ipoint]bool{}
		for _, p := range pts {
			seen[p] = true
		}
		for len(pts) < 80 {
			p := ipoint{int64(r.IntN(5)) * 15, int64(r.IntN(61)), int64(r.IntN(4)) * 20}
			if !seen[p] {
				seen[p] = true
				pts = append(pts, p)
			}
		}
		tri, err := newTriangulation(pts)
		must.NoError(t, err)
		checkDelaunay(t, tri, 6*60*60*60)
	}
}

// TestTriangulation_LinearExact: interpolating a linear function is exact,
// whatever the split of the degenerate cells.
func TestTriangulation_LinearExact(t *testing.T) {
	pts := lattice(4, 4, 3, 2)
	f := func(p [3]float64) float64 { return 1 + 2*p[0] - 3*p[1] + 0.5*p[2] }
	vals := make([]perfPoint, len(pts))
	for i, p := range pts {
		vals[i] = perfPoint{float64(p[2]), f([3]float64{float64(p[0]), float64(p[1]), float64(p[2])}), 1}
	}
	tri, err := newTriangulation(pts)
	must.NoError(t, err)
	tables := tri.lineTables(8, 8, vals)
	for x := 1; x <= 8; x++ {
		for y := 1; y <= 8; y++ {
			line := tables[x-1][y-1]
			must.SliceNotEmpty(t, line)
			must.Eq(t, 0, line[0].bsz)
			must.Eq(t, 6, line[len(line)-1].bsz)
			for _, z := range []float64{0, 0.5, 1, 2.25, 3, 5.9, 6} {
				step, sync := interpPerf(line, z)
				must.InDelta(t, f([3]float64{float64(x), float64(y), z}), step, 1e-9)
				must.InDelta(t, 1, sync, 1e-12)
			}
		}
	}
}

// TestTriangulation_Split: a degenerate cell is split as pullOrder says.
// The cube [0, 2]^3's first vertex is (0, 2, 2) (fewest x, most y, most
// z), so its face y = 2 splits along the diagonal from (0, 2, 2) to
// (2, 2, 0). With 1 at (2, 2, 2) and 0 elsewhere, the point (1, 2, 1.5) is
// in the triangle (0,2,2), (2,2,0), (2,2,2), where the value is
// (x + z - 2) / 2 = 0.25; the other diagonal would give x / 2 = 0.5.
func TestTriangulation_Split(t *testing.T) {
	pts := lattice(1, 1, 1, 2)
	vals := make([]perfPoint, len(pts))
	for i, p := range pts {
		vals[i] = perfPoint{bsz: float64(p[2])}
		if p == (ipoint{2, 2, 2}) {
			vals[i].step = 1
		}
	}
	tri, err := newTriangulation(pts)
	must.NoError(t, err)
	tables := tri.lineTables(2, 2, vals)
	step, _ := interpPerf(tables[0][1], 1.5)
	must.InDelta(t, 0.25, step, 1e-12)
}

func TestTriangulation_Errors(t *testing.T) {
	_, err := newTriangulation([]ipoint{{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0}})
	must.ErrorContains(t, err, "coplanar")
	_, err = newTriangulation([]ipoint{{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 0, 0}})
	must.ErrorContains(t, err, "twice")
	_, err = newTriangulation([]ipoint{{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, maxLatticeCoord + 1}})
	must.ErrorContains(t, err, "coordinates")
}

// TestShapeTable_Reference compares the interpolation with the values of
// tools/pollux_interp_reference.py (scipy's, as Pollux's simulator), a
// CSV whose path is in SIM_INTERP_REFERENCE; the applications are read
// from SIM_INTERP_APPS (default ../../shared/traces/pollux/apps). It logs,
// per application, how far ours is from scipy's inside the hull (scipy's
// nan outside): the split of degenerate cells differs (pullOrder), so this
// measures and does not fail.
//
//	tools/pollux_interp_reference.py ../shared/traces/pollux/apps > /tmp/ref.csv
//	SIM_INTERP_REFERENCE=/tmp/ref.csv go test ./sim -run TestShapeTable_Reference -v
func TestShapeTable_Reference(t *testing.T) {
	path := os.Getenv("SIM_INTERP_REFERENCE")
	if path == "" {
		t.Skip("SIM_INTERP_REFERENCE is not set")
	}
	dir := cmp.Or(os.Getenv("SIM_INTERP_APPS"), "../../shared/traces/pollux/apps")
	apps, err := LoadApps(dir)
	must.NoError(t, err)
	f, err := os.Open(path)
	must.NoError(t, err)
	defer f.Close()
	type stats struct{ step, both []float64 }
	by := map[string]*stats{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		x := strings.Split(sc.Text(), ",")
		if x[0] == "app" {
			continue
		}
		must.Len(t, 6, x)
		var v [5]float64
		for i := range v {
			v[i], err = strconv.ParseFloat(x[i+1], 64)
			must.NoError(t, err)
		}
		if math.IsNaN(v[3]) {
			continue
		}
		a := apps[x[0]]
		must.NotNil(t, a, must.Sprintf("application %s", x[0]))
		step, sync := a.shapes.at(int(v[0]), int(v[1]), v[2])
		s := by[x[0]]
		if s == nil {
			s = &stats{}
			by[x[0]] = s
		}
		rs := math.Abs(step-v[3]) / v[3]
		s.step = append(s.step, rs)
		s.both = append(s.both, max(rs, math.Abs(sync-v[4])/v[4]))
	}
	must.NoError(t, sc.Err())
	for _, name := range slices.Sorted(maps.Keys(by)) {
		s := by[name]
		line := func(r []float64) string {
			slices.Sort(r)
			over := len(r) - sort.SearchFloat64s(r, 1e-3)
			return fmt.Sprintf("max %.3g, median %.2g, p90 %.3g, over 0.1%% %d (%.1f%%)",
				r[len(r)-1], r[len(r)/2], r[len(r)*9/10], over, 100*float64(over)/float64(len(r)))
		}
		t.Logf("%s: %d queries; step time: %s; step or sync time: %s", name, len(s.step), line(s.step), line(s.both))
	}
}
