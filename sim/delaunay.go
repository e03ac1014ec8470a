package sim

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Linear interpolation over a 3-D Delaunay triangulation, as Pollux's
// simulator interpolates the step and sync times of a placement that
// placements.csv did not measure (scipy's LinearNDInterpolator over
// (num_nodes, num_replicas, local_bsz); tools/pollux_interp_reference.py
// prints its values).
//
// The measured points lie on a lattice, so the triangulation is
// degenerate: most Delaunay cells are prisms and boxes with six or eight
// cospherical vertices, which any triangulation of the cell may split, and
// the values inside depend on the split. Qhull (scipy) splits them by the
// history of its construction (about half of the rectangles one way, half
// the other, whatever their geometry); here the split is a pulling
// triangulation (symbolic perturbation, Edelsbrunner and Mücke's
// simulation of simplicity): the points' heights on the paraboloid are
// lowered by eps^rank in pullOrder, so the first vertex of a cell is the
// apex every tetrahedron of the cell shares. Off the measured shapes
// (5 nodes or more) it differs from scipy by more than 0.1% in 28-56% of
// the queries, by application (TestShapeTable_Reference). Predicates are
// exact (integer coordinates, 128-bit products), so the triangulation does
// not depend on rounding or on the order of insertion. It is built by
// Bowyer-Watson insertion with a vertex at infinity (ghost tetrahedra
// outside the hull faces), which keeps the hull's flat faces exact.
//
// Queries have integer nodes and replicas, so the interpolant is tabulated
// once on each line (nodes, replicas, *): the line crosses the tetrahedra
// in segments, on each of which the interpolant is linear in the local
// batch size, and a table of the segments' ends gives it exactly.

// maxLatticeCoord bounds the coordinates so that orient3d fits in an int64
// and insphere in 128 bits.
const maxLatticeCoord = 1 << 16

type ipoint [3]int64

// tet is a positively oriented tetrahedron (orient3d > 0 for real ones);
// vertex infinite (-1) makes it a ghost outside a hull face. nb[i] is the
// tetrahedron across the face opposite v[i].
type tet struct {
	v, nb [4]int32
	dead  bool
}

const infinite = -1

type triangulation struct {
	pts  []ipoint
	tets []tet
}

// orient3d is positive when d lies on the side of plane (a, b, c) from
// which a, b, c appear clockwise (Shewchuk's convention).
func orient3d(a, b, c, d ipoint) int64 {
	ax, ay, az := a[0]-d[0], a[1]-d[1], a[2]-d[2]
	bx, by, bz := b[0]-d[0], b[1]-d[1], b[2]-d[2]
	cx, cy, cz := c[0]-d[0], c[1]-d[1], c[2]-d[2]
	return ax*(by*cz-bz*cy) + bx*(cy*az-cz*ay) + cx*(ay*bz-az*by)
}

// i128 is a signed 128-bit integer for the insphere determinant.
type i128 struct {
	hi int64
	lo uint64
}

func mul128(a, b int64) i128 {
	neg := (a < 0) != (b < 0)
	ua, ub := uint64(a), uint64(b)
	if a < 0 {
		ua = uint64(-a)
	}
	if b < 0 {
		ub = uint64(-b)
	}
	hi, lo := bits.Mul64(ua, ub)
	r := i128{int64(hi), lo}
	if neg {
		r = r.neg()
	}
	return r
}

func (x i128) neg() i128 {
	lo, c := bits.Add64(^x.lo, 1, 0)
	return i128{^x.hi + int64(c), lo}
}

func (x i128) add(y i128) i128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	return i128{x.hi + y.hi + int64(c), lo}
}

func (x i128) sign() int {
	switch {
	case x.hi < 0:
		return -1
	case x.hi > 0 || x.lo != 0:
		return 1
	}
	return 0
}

func sign64(x int64) int { return cmp.Compare(x, 0) }

// inSphere returns the sign of Shewchuk's insphere(a, b, c, d, e) for the
// points with indices q (a positively oriented tetrahedron q[0..3] and the
// query q[4]), positive when e is inside the circumsphere, with the
// heights perturbed as the file comment says: never zero.
func (t *triangulation) inSphere(q [5]int32) int {
	e := t.pts[q[4]]
	var d [4][3]int64
	var lift [4]int64
	for i := range 4 {
		p := t.pts[q[i]]
		for k := range 3 {
			d[i][k] = p[k] - e[k]
		}
		lift[i] = d[i][0]*d[i][0] + d[i][1]*d[i][1] + d[i][2]*d[i][2]
	}
	// Expand along the lift column: cof[i] is the cofactor of row i.
	var cof [4]int64
	for i := range 4 {
		var m [3][3]int64
		r := 0
		for j := range 4 {
			if j != i {
				m[r] = d[j]
				r++
			}
		}
		det := m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) -
			m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) +
			m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
		if i%2 == 0 { // (-1)^(i+4) with the column 4th (index 3): sign (-1)^(i+3)
			det = -det
		}
		cof[i] = det
	}
	var s i128
	for i := range 4 {
		s = s.add(mul128(lift[i], cof[i]))
	}
	if sg := s.sign(); sg != 0 {
		return sg
	}
	// Cospherical: the perturbation of the first point in pullOrder with a
	// nonzero coefficient decides (delta = -eps^rank, rank 1 the first). The lift of row i is
	// |p_i - e|^2 + delta_i - delta_e, so delta_i's coefficient is cof[i]
	// and delta_e's is -sum(cof).
	coef := func(i int) int64 {
		if i < 4 {
			return cof[i]
		}
		return -(cof[0] + cof[1] + cof[2] + cof[3])
	}
	order := []int{0, 1, 2, 3, 4}
	slices.SortFunc(order, func(x, y int) int { return t.pullOrder(q[x], q[y]) })
	for _, i := range order {
		if c := coef(i); c != 0 {
			return -sign64(c)
		}
	}
	panic("delaunay: degenerate tetrahedron")
}

// pullOrder is the order in which a degenerate cell's vertices are pulled
// (cmp): fewer nodes first, then more replicas, then a larger local batch.
// Of the cell's vertices, the first is the apex of all its tetrahedra, so
// that a rectangle (nodes and local batch) splits along the diagonal from
// fewer nodes at the larger batch to more nodes at the smaller one. It is
// not Qhull's rule (Qhull splits by the history of its construction); of
// the four orders of this kind (the others: the points' order, by
// coordinate, and the two with replicas or batch ascending), it is one of
// the two with which the Tiresias replays have the published JCTs
// (docs/sim/README.md, "Tiresias against the published, job by job").
func (t *triangulation) pullOrder(i, j int32) int {
	p, q := t.pts[i], t.pts[j]
	return cmp.Or(cmp.Compare(p[0], q[0]), cmp.Compare(q[1], p[1]), cmp.Compare(q[2], p[2]))
}

func (t *triangulation) orient(v [4]int32) int64 {
	return orient3d(t.pts[v[0]], t.pts[v[1]], t.pts[v[2]], t.pts[v[3]])
}

// conflict says whether point p is in tetrahedron k's circumsphere (a
// ghost's: strictly beyond its hull face, or on the face's plane and in
// conflict with the real tetrahedron across it).
func (t *triangulation) conflict(k int32, p int32) bool {
	v := t.tets[k].v
	if i := slices.Index(v[:], infinite); i >= 0 {
		v[i] = p
		switch o := t.orient(v); {
		case o > 0:
			return true
		case o < 0:
			return false
		}
		return t.conflict(t.tets[k].nb[i], p)
	}
	return t.inSphere([5]int32{v[0], v[1], v[2], v[3], p}) > 0
}

// checkLattice says whether pts can be triangulated: distinct, integer
// coordinates in [0, maxLatticeCoord], not all coplanar.
func checkLattice(pts []ipoint) error {
	seen := make(map[ipoint]bool, len(pts))
	for _, p := range pts {
		for _, c := range p {
			if c < 0 || c > maxLatticeCoord {
				return fmt.Errorf("point %v: coordinates must be in [0, %d]", p, maxLatticeCoord)
			}
		}
		if seen[p] {
			return fmt.Errorf("point %v twice", p)
		}
		seen[p] = true
	}
	_, err := (&triangulation{pts: pts}).firstTet()
	return err
}

// newTriangulation triangulates pts (as checkLattice requires).
func newTriangulation(pts []ipoint) (*triangulation, error) {
	if err := checkLattice(pts); err != nil {
		return nil, err
	}
	t := &triangulation{pts: pts}
	first, _ := t.firstTet()
	last := int32(0)
	for i := range pts {
		if slices.Contains(first[:], int32(i)) {
			continue
		}
		last = t.insert(int32(i), last)
	}
	return t, nil
}

// firstTet starts the triangulation with four points in general position
// and the four ghosts around it.
func (t *triangulation) firstTet() ([4]int32, error) {
	n := int32(len(t.pts))
	v := [4]int32{0, -1, -1, -1}
	for i := int32(1); i < n && v[1] < 0; i++ {
		v[1] = i
	}
	for i := v[1] + 1; i < n && v[2] < 0; i++ {
		a, b, c := t.pts[v[0]], t.pts[v[1]], t.pts[i]
		ab := [3]int64{b[0] - a[0], b[1] - a[1], b[2] - a[2]}
		ac := [3]int64{c[0] - a[0], c[1] - a[1], c[2] - a[2]}
		if ab[1]*ac[2]-ab[2]*ac[1] != 0 || ab[2]*ac[0]-ab[0]*ac[2] != 0 || ab[0]*ac[1]-ab[1]*ac[0] != 0 {
			v[2] = i
		}
	}
	for i := v[2] + 1; v[2] >= 0 && i < n && v[3] < 0; i++ {
		if orient3d(t.pts[v[0]], t.pts[v[1]], t.pts[v[2]], t.pts[i]) != 0 {
			v[3] = i
		}
	}
	if v[3] < 0 {
		return v, fmt.Errorf("the %d points are coplanar", n)
	}
	if t.orient(v) < 0 {
		v[0], v[1] = v[1], v[0]
	}
	t.tets = append(t.tets, tet{v: v})
	for i := range 4 {
		// The ghost across face i: v[i] replaced by infinity and two
		// others swapped, so that a point beyond the face in place of
		// infinity orients positively.
		g := v
		g[i] = infinite
		j, k := (i+1)%4, (i+2)%4
		g[j], g[k] = g[k], g[j]
		t.tets = append(t.tets, tet{v: g})
	}
	t.link(0, 5)
	return v, nil
}

// link sets the neighbours of tetrahedra [from, to) among themselves and
// with every live tetrahedron sharing a face (used for the first five).
func (t *triangulation) link(from, to int32) {
	for a := from; a < to; a++ {
		for i := range 4 {
			for b := from; b < to; b++ {
				if b != a && sharesFace(t.tets[a].v, i, t.tets[b].v) {
					t.tets[a].nb[i] = b
				}
			}
		}
	}
}

// sharesFace says whether w holds the three vertices of v but v[i].
func sharesFace(v [4]int32, i int, w [4]int32) bool {
	for j := range 4 {
		if j != i && !slices.Contains(w[:], v[j]) {
			return false
		}
	}
	return true
}

// insert adds point p (Bowyer-Watson), starting the search at tetrahedron
// start, and returns one of the new tetrahedra.
func (t *triangulation) insert(p, start int32) int32 {
	k := t.locate(p, start)
	// The cavity: every tetrahedron in conflict, connected to k.
	cavity := []int32{k}
	in := map[int32]bool{k: true}
	out := map[int32]bool{}
	type face struct {
		tet int32 // in the cavity
		i   int   // opposite vertex
	}
	var boundary []face
	for n := 0; n < len(cavity); n++ {
		c := cavity[n]
		for i, nb := range t.tets[c].nb {
			switch {
			case in[nb]:
			case out[nb]:
				boundary = append(boundary, face{c, i})
			case t.conflict(nb, p):
				in[nb] = true
				cavity = append(cavity, nb)
			default:
				out[nb] = true
				boundary = append(boundary, face{c, i})
			}
		}
	}
	// A new tetrahedron per boundary face: the cavity tetrahedron with the
	// vertex opposite the face replaced by p (p sees the face from the
	// same side, so the orientation is kept).
	type edge [2]int32
	open := make(map[edge]struct {
		tet int32
		i   int
	})
	var last int32
	for _, f := range boundary {
		old := t.tets[f.tet]
		nt := tet{v: old.v}
		nt.v[f.i] = p
		outside := old.nb[f.i]
		nt.nb[f.i] = outside
		id := int32(len(t.tets))
		t.tets = append(t.tets, nt)
		// The outside tetrahedron's link back to the cavity.
		for j, b := range t.tets[outside].nb {
			if b == f.tet && sharesFace(t.tets[outside].v, j, nt.v) {
				t.tets[outside].nb[j] = id
			}
		}
		// The faces through p are shared with other new tetrahedra: key
		// each by the two vertices other than p and the opposite one.
		for j := range 4 {
			if j == f.i {
				continue
			}
			var e edge
			n := 0
			for m := range 4 {
				if m != j && m != f.i {
					e[n] = nt.v[m]
					n++
				}
			}
			if e[0] > e[1] {
				e[0], e[1] = e[1], e[0]
			}
			if o, ok := open[e]; ok {
				t.tets[id].nb[j] = o.tet
				t.tets[o.tet].nb[o.i] = id
				delete(open, e)
			} else {
				open[e] = struct {
					tet int32
					i   int
				}{id, j}
			}
		}
		last = id
	}
	if len(open) != 0 {
		panic("delaunay: cavity not closed")
	}
	for _, c := range cavity {
		t.tets[c].dead = true
	}
	return last
}

// locate returns a tetrahedron in conflict with p: the one containing it
// (a visibility walk from start), or a ghost whose hull face p is beyond.
func (t *triangulation) locate(p, start int32) int32 {
	k := start
	for t.tets[k].dead {
		k++ // the newest tetrahedra are at the end, alive
		if int(k) == len(t.tets) {
			k = 0
		}
	}
	for steps := 0; steps < 4*len(t.tets); steps++ {
		tt := t.tets[k]
		if slices.Contains(tt.v[:], infinite) {
			if t.conflict(k, p) {
				return k
			}
			// On the hull face's plane and not in conflict: walk inside.
			i := slices.Index(tt.v[:], infinite)
			k = tt.nb[i]
			continue
		}
		moved := false
		for i := range 4 {
			v := tt.v
			v[i] = p
			if t.orient(v) < 0 {
				k = tt.nb[i]
				moved = true
				break
			}
		}
		if !moved {
			return k
		}
	}
	// The walk cycled (it should not): test every tetrahedron.
	for k := range t.tets {
		if !t.tets[k].dead && t.conflict(int32(k), p) {
			return int32(k)
		}
	}
	panic("delaunay: no tetrahedron in conflict")
}

// lineTables tabulates the interpolant along every line (x, y, *) with
// integer x in [1, maxX] and y in [1, maxY] that crosses the hull: the
// values at the ends of the segments where the line crosses the
// tetrahedra, by z (local batch size). tables[x-1][y-1] is nil for a line
// outside the hull.
func (t *triangulation) lineTables(maxX, maxY int64, vals []perfPoint) [][][]perfPoint {
	segs := make([][][][2]perfPoint, maxX)
	for x := range segs {
		segs[x] = make([][][2]perfPoint, maxY)
	}
	for _, tt := range t.tets {
		if tt.dead || slices.Contains(tt.v[:], infinite) {
			continue
		}
		var p [4]ipoint
		minX, maxXt, minY, maxYt := int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64), int64(math.MinInt64)
		for i, v := range tt.v {
			p[i] = t.pts[v]
			minX, maxXt = min(minX, p[i][0]), max(maxXt, p[i][0])
			minY, maxYt = min(minY, p[i][1]), max(maxYt, p[i][1])
		}
		vol := t.orient(tt.v)
		for x := max(minX, 1); x <= min(maxXt, maxX); x++ {
			for y := max(minY, 1); y <= min(maxYt, maxY); y++ {
				if s, ok := t.segment(p, vol, tt.v, x, y, vals); ok {
					segs[x-1][y-1] = append(segs[x-1][y-1], s)
				}
			}
		}
	}
	tables := make([][][]perfPoint, maxX)
	for x := range segs {
		tables[x] = make([][]perfPoint, maxY)
		for y, ss := range segs[x] {
			tables[x][y] = joinSegments(ss)
		}
	}
	return tables
}

// segment returns where line (x, y, *) crosses tetrahedron p (vertices v,
// volume vol: 6 times the volume), with the interpolated values at both
// ends; false if it does not or only touches it.
func (t *triangulation) segment(p [4]ipoint, vol int64, v [4]int32, x, y int64, vals []perfPoint) ([2]perfPoint, bool) {
	// Barycentric coordinate i at (x, y, z) is orient3d with vertex i
	// replaced by the point, over vol: affine in z, (a_i + b_i z) / vol,
	// exact in integers.
	lo, hi := math.Inf(-1), math.Inf(1)
	var a, b [4]int64
	for i := range 4 {
		q := p
		q[i] = ipoint{x, y, 0}
		a[i] = orient3d(q[0], q[1], q[2], q[3])
		q[i] = ipoint{x, y, 1}
		b[i] = orient3d(q[0], q[1], q[2], q[3]) - a[i]
		switch {
		case b[i] == 0 && a[i] < 0:
			return [2]perfPoint{}, false
		case b[i] > 0:
			lo = max(lo, -float64(a[i])/float64(b[i]))
		case b[i] < 0:
			hi = min(hi, -float64(a[i])/float64(b[i]))
		}
	}
	if !(lo < hi) {
		return [2]perfPoint{}, false
	}
	at := func(z float64) perfPoint {
		r := perfPoint{bsz: z}
		for i, k := range v {
			w := (float64(a[i]) + float64(b[i])*z) / float64(vol)
			r.step += w * vals[k].step
			r.sync += w * vals[k].sync
		}
		return r
	}
	return [2]perfPoint{at(lo), at(hi)}, true
}

// joinSegments makes one table of a line's segments. They tile the line's
// stretch in the hull (those along a face shared by tetrahedra repeat, with
// the same values), and the interpolant is continuous where they meet, so
// one end per breakpoint will do.
func joinSegments(segs [][2]perfPoint) []perfPoint {
	slices.SortFunc(segs, func(s, u [2]perfPoint) int { return cmp.Compare(s[0].bsz, u[0].bsz) })
	var out []perfPoint
	for _, s := range segs {
		for _, e := range s {
			if n := len(out); n > 0 && e.bsz <= out[n-1].bsz+1e-9*max(1, math.Abs(e.bsz)) {
				continue
			}
			out = append(out, e)
		}
	}
	return out
}
