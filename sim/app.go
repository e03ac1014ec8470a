package sim

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// App is one application of the Pollux traces (apps/<name>/): its measured
// step and sync times per placement and local batch size, and its
// validation curves (progress and gradient statistics per epoch) per total
// batch size. It is read-only once loaded and shared by all its jobs.
type App struct {
	Name string
	// GPU is the GPU model whose profile this is (LoadAppProfile); "" for
	// a Pollux application's one profile.
	GPU string
	// InitBatch is the smallest validated batch size, the reference of the
	// statistical efficiency; MaxBatch the largest.
	InitBatch, MaxBatch float64
	// MinLocal and MaxLocal bound the per-GPU (atomic) batch size.
	MinLocal, MaxLocal float64
	// Epochs is the number of epochs to the end of the validation curves.
	Epochs int

	placements map[string][]perfPoint // rotation-normalised placement -> by local batch
	shapes     shapeTable             // other placements, by nodes and replicas
	curves     []curve                // by batch size
	progress   []float64              // progress[e]: progress at the end of epoch e (progress[0] = 0)
}

// perfPoint is a measured step and sync time at a local batch size.
type perfPoint struct{ bsz, step, sync float64 }

// shapeTable interpolates the step and sync times of placements that
// placements.csv did not measure, as Pollux's simulator: linearly over a
// Delaunay triangulation (delaunay.go) of the measured shapes (nodes,
// replicas, local batch): placements.csv averaged by shape, then
// scalability.csv's rows, in Pollux's order. The table is built at the
// first such query (~10-70 ms an application;
// sync.Once: applications are shared between concurrent runs).
type shapeTable struct {
	once   sync.Once
	points []ipoint    // in Pollux's order
	vals   []perfPoint // step and sync time of each point
	nLo    int
	rLo    []int           // by nodes - nLo: the least replicas inside the hull
	lines  [][][]perfPoint // by nodes - nLo, replicas - rLo: the interpolant over local batch
	// flat holds the shapes by (nodes, replicas) when they are coplanar
	// (say, one GPU only), where Qhull fails and so would Pollux's
	// simulator: a query takes the nearest shape.
	flat map[[2]int64][]perfPoint
}

// curve is one validation-<batch>.csv.
type curve struct {
	batch             float64
	progress          []float64
	gradSqr, gradVars []float64
}

// polluxMaxLocal are the per-GPU batch limits that Pollux's simulator
// sets by application name (simulator/applications.py: yolov3's
// max_local_bsz=8); for the others it takes placements.csv's largest.
var polluxMaxLocal = map[string]float64{"yolov3": 8}

// LoadApps loads every application under dir (one folder per app).
func LoadApps(dir string) (map[string]*App, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("failed to read applications: %w", err)
	}
	apps := make(map[string]*App)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		a, err := LoadApp(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		apps[a.Name] = a
	}
	if len(apps) == 0 {
		return nil, fmt.Errorf("failed to read applications: no application folders in %s", dir)
	}
	return apps, nil
}

// LoadApp loads one application folder: placements.csv, scalability.csv
// and validation-<batch>.csv.
func LoadApp(dir string) (*App, error) {
	a, err := loadApp(dir, "", 0)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// LoadAppProfile loads one application folder's profile of GPU model gpu,
// as Sia's simulator reads them: placements-<gpu>.csv,
// scalability-<gpu>.csv (their columns in any order) and the shared
// validation-<batch>.csv. maxLocal, if above 0, caps the per-GPU batch
// below the largest of placements-<gpu>.csv (Sia's deepspeech2 on rtx: 57).
func LoadAppProfile(dir, gpu string, maxLocal float64) (*App, error) {
	if err := checkModelName(gpu); err != nil {
		return nil, fmt.Errorf("failed to load application %s: %w", filepath.Base(dir), err)
	}
	if !(maxLocal >= 0 && maxLocal <= MaxBatch) {
		return nil, fmt.Errorf("failed to load application %s: per-GPU batch cap %g is not from 0 to %d", filepath.Base(dir), maxLocal, MaxBatch)
	}
	return loadApp(dir, gpu, maxLocal)
}

func loadApp(dir, gpu string, maxLocal float64) (*App, error) {
	a := &App{Name: filepath.Base(dir), GPU: gpu, placements: make(map[string][]perfPoint)}
	suffix := ""
	if gpu != "" {
		suffix = "-" + gpu
	}
	sums := make(map[ipoint]*shapeSum)
	placementsMax, err := a.readPlacements(filepath.Join(dir, "placements"+suffix+".csv"), sums)
	if err != nil {
		return nil, err
	}
	// Pollux: placements.groupby([nodes, replicas, local_bsz]).mean() (in
	// the keys' order), then scalability.csv's rows.
	for _, k := range slices.SortedFunc(maps.Keys(sums), func(x, y ipoint) int { return slices.Compare(x[:], y[:]) }) {
		s := sums[k]
		a.shapes.points = append(a.shapes.points, k)
		a.shapes.vals = append(a.shapes.vals, perfPoint{float64(k[2]), s.step / float64(s.n), s.sync / float64(s.n)})
	}
	if err := a.readScalability(filepath.Join(dir, "scalability"+suffix+".csv"), sums); err != nil {
		return nil, err
	}
	// As Pollux's simulator (applications.py): the largest local batch
	// size of placements.csv, unless it sets one for the application.
	a.MaxLocal = placementsMax
	if m, ok := polluxMaxLocal[a.Name]; ok && gpu == "" {
		a.MaxLocal = min(placementsMax, m)
	}
	if maxLocal > 0 {
		a.MaxLocal = min(placementsMax, maxLocal)
	}
	for _, pts := range a.placements {
		slices.SortFunc(pts, func(x, y perfPoint) int { return cmp.Compare(x.bsz, y.bsz) })
	}
	if err := a.readCurves(dir); err != nil {
		return nil, err
	}
	if err := a.tabulateProgress(); err != nil {
		return nil, err
	}
	if a.MinLocal <= 0 || a.MaxLocal < a.MinLocal || a.progress[a.Epochs] <= 0 {
		return nil, fmt.Errorf("failed to load application %s: no usable measurements", a.Name)
	}
	return a, nil
}

// shapeSum sums the placements of one shape (nodes, replicas) at one
// local batch size, whose mean Pollux's simulator interpolates between
// shapes.
type shapeSum struct {
	step, sync float64
	n          int
}

// latticeCoord is v as a coordinate of the shapes' lattice, -1 if it is
// not an integer in [0, maxLatticeCoord].
func latticeCoord(v float64) int64 {
	if v != math.Trunc(v) || v < 0 || v > maxLatticeCoord {
		return -1
	}
	return int64(v)
}

// readPlacements reads placements.csv (at path) into a's placements and
// MinLocal, and each shape's sums into sums; it returns the largest local
// batch size it measures.
func (a *App) readPlacements(path string, sums map[ipoint]*shapeSum) (float64, error) {
	placementsMax := 0.0
	err := readCSV(path, []string{"placement", "local_bsz", "step_time", "sync_time"},
		func(_ int, f []string) error {
			id := f[0]
			nodes, replicas := 0, 0
			for _, d := range id {
				if d < '1' || d > '9' {
					return fmt.Errorf("placement %q: not digits 1-9", id)
				}
				nodes++
				replicas += int(d - '0')
			}
			if nodes == 0 {
				return fmt.Errorf("empty placement")
			}
			v, err := floats(f[1:])
			if err != nil {
				return err
			}
			a.placements[id] = append(a.placements[id], perfPoint{v[0], v[1], v[2]})
			k := ipoint{int64(nodes), int64(replicas), latticeCoord(v[0])}
			if k[2] < 0 {
				return fmt.Errorf("local_bsz %v is not an integer in [0, %d]", v[0], maxLatticeCoord)
			}
			s := sums[k]
			if s == nil {
				s = &shapeSum{}
				sums[k] = s
			}
			s.step += v[1]
			s.sync += v[2]
			s.n++
			placementsMax = max(placementsMax, v[0])
			a.MinLocal = minPositive(a.MinLocal, v[0])
			return nil
		})
	return placementsMax, err
}

// readScalability adds the rows of scalability.csv (at path) to a's
// shapes, those of a shape not in sums (measured in placements.csv or in
// an earlier row), which it adds to sums.
func (a *App) readScalability(path string, sums map[ipoint]*shapeSum) error {
	return readCSV(path, []string{"num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"},
		func(_ int, f []string) error {
			v, err := floats(f)
			if err != nil {
				return err
			}
			k := ipoint{latticeCoord(v[0]), latticeCoord(v[1]), latticeCoord(v[2])}
			if k[0] < 1 || k[1] < k[0] || k[2] < 0 {
				return fmt.Errorf("%v nodes with %v replicas at local batch %v: not integers in [0, %d] with nodes >= 1 and replicas >= nodes",
					v[0], v[1], v[2], maxLatticeCoord)
			}
			if _, ok := sums[k]; ok {
				// Measured twice: Qhull makes one of the two a vertex
				// (which, its construction decides); the first counts.
				return nil
			}
			sums[k] = nil
			a.shapes.points = append(a.shapes.points, k)
			a.shapes.vals = append(a.shapes.vals, perfPoint{v[2], v[3], v[4]})
			return nil
		})
}

// readCurves reads dir's validation-<batch>.csv files into a's curves,
// sorted by batch size.
func (a *App) readCurves(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "validation-*.csv"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("failed to load application %s: no validation-<batch>.csv files", a.Name)
	}
	for _, path := range files {
		b := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "validation-"), ".csv")
		batch, err := strconv.Atoi(b)
		if err != nil || batch < 1 {
			return fmt.Errorf("failed to load application %s: %s: batch size %q is not a positive integer", a.Name, path, b)
		}
		c := curve{batch: float64(batch)}
		err = readCSV(path, []string{"progress", "iteration", "metric", "grad_sqr", "grad_var"}, func(_ int, f []string) error {
			v, err := floats(f)
			if err != nil {
				return err
			}
			c.progress = append(c.progress, v[0])
			c.gradSqr = append(c.gradSqr, v[3])
			c.gradVars = append(c.gradVars, v[4])
			return nil
		})
		if err != nil {
			return err
		}
		if len(c.progress) == 0 {
			return fmt.Errorf("failed to load application %s: %s has no epochs", a.Name, path)
		}
		a.curves = append(a.curves, c)
	}
	slices.SortFunc(a.curves, func(x, y curve) int { return cmp.Compare(x.batch, y.batch) })
	return nil
}

// tabulateProgress sets a's batch range, Epochs and progress from its
// curves (sorted by batch size).
func (a *App) tabulateProgress() error {
	a.InitBatch, a.MaxBatch = a.curves[0].batch, a.curves[len(a.curves)-1].batch
	// As Pollux: the end is the shortest curve's end; the progress at the
	// end of epoch e is the least over the curves.
	a.Epochs = len(a.curves[0].progress)
	for _, c := range a.curves {
		a.Epochs = min(a.Epochs, len(c.progress))
	}
	a.progress = make([]float64, a.Epochs+1)
	for e := 1; e <= a.Epochs; e++ {
		p := math.Inf(1)
		for _, c := range a.curves {
			p = min(p, c.progress[e-1])
		}
		if p < a.progress[e-1] {
			return fmt.Errorf("failed to load application %s: progress falls at epoch %d", a.Name, e)
		}
		a.progress[e] = p
	}
	return nil
}

// Work returns the progress at the end of the validation curves, where a
// job of the application is done.
func (a *App) Work() float64 { return a.progress[a.Epochs] }

// epoch returns the epoch a job is in at progress p (0-based; Epochs when
// done).
func (a *App) epoch(p float64) int {
	// The last e with progress[e] <= p: epochs of no progress are passed.
	e := sort.Search(len(a.progress), func(k int) bool { return a.progress[k] > p }) - 1
	return min(max(e, 0), a.Epochs)
}

// Throughput returns the step time and the sync time (seconds) of one
// iteration on placement (GPUs per node; zeros ignored) with local batch
// size bsz per GPU. A placement measured in placements.csv (up to a
// rotation, as Pollux normalises it) is interpolated over local batch size;
// any other is interpolated linearly between the measured shapes over a
// Delaunay triangulation of (nodes, replicas, local batch), nodes at most
// 16, as in Pollux (shapeTable). Outside the measurements values are
// clamped to the nearest: local batch size to the line's stretch in the
// hull, replicas to the hull's range at that number of nodes (Pollux's
// simulator stops with NaN there).
func (a *App) Throughput(placement []int, bsz float64) (step, sync float64) {
	if pts, ok := a.placements[placementID(placement)]; ok {
		return interpPerf(pts, bsz)
	}
	nodes, replicas := 0, 0
	for _, g := range placement {
		if g > 0 {
			nodes++
			replicas += g
		}
	}
	return a.shapes.at(min(nodes, 16), replicas, bsz)
}

// at interpolates on nodes and replicas (clamped to the hull), over bsz.
func (t *shapeTable) at(nodes, replicas int, bsz float64) (step, sync float64) {
	t.once.Do(t.build)
	if t.flat != nil {
		return t.nearest(nodes, replicas, bsz)
	}
	n := min(max(nodes-t.nLo, 0), len(t.lines)-1)
	r := min(max(replicas-t.rLo[n], 0), len(t.lines[n])-1)
	return interpPerf(t.lines[n][r], bsz)
}

// build triangulates the points and tabulates the interpolant on each line
// (nodes, replicas) that crosses the hull.
func (t *shapeTable) build() {
	tri, err := newTriangulation(t.points)
	if err != nil {
		// Coplanar (LoadApp has checked the rest).
		t.flat = make(map[[2]int64][]perfPoint)
		for i, p := range t.points {
			k := [2]int64{p[0], p[1]}
			t.flat[k] = append(t.flat[k], t.vals[i])
		}
		for _, pts := range t.flat {
			slices.SortFunc(pts, func(x, y perfPoint) int { return cmp.Compare(x.bsz, y.bsz) })
		}
		return
	}
	nMax, rMax := int64(0), int64(0)
	for _, p := range t.points {
		nMax, rMax = max(nMax, p[0]), max(rMax, p[1])
	}
	tables := tri.lineTables(nMax, rMax, t.vals)
	// The hull is convex: on each number of nodes, the lines crossing it
	// are a range of replicas. A number of nodes none crosses (a thin hull
	// between two measured ones, not Pollux's) takes the fewer nodes'.
	for n, row := range tables {
		lo := slices.IndexFunc(row, func(l []perfPoint) bool { return l != nil })
		switch {
		case lo >= 0:
			hi := len(row)
			for row[hi-1] == nil {
				hi--
			}
			for r := lo + 1; r < hi; r++ {
				if row[r] == nil { // only touches the hull there
					row[r] = row[r-1]
				}
			}
			if len(t.lines) == 0 {
				t.nLo = n + 1
			}
			t.lines = append(t.lines, row[lo:hi])
			t.rLo = append(t.rLo, lo+1)
		case len(t.lines) > 0:
			t.lines = append(t.lines, t.lines[len(t.lines)-1])
			t.rLo = append(t.rLo, t.rLo[len(t.rLo)-1])
		}
	}
	if len(t.lines) == 0 {
		panic("sim: no line (nodes, replicas, *) crosses the hull of the measured shapes")
	}
}

// nearest interpolates over bsz on the shape nearest (nodes, replicas):
// fewest nodes away, then fewest replicas, then the smaller.
func (t *shapeTable) nearest(nodes, replicas int, bsz float64) (step, sync float64) {
	dist := func(k [2]int64) []int64 {
		n, r := k[0]-int64(nodes), k[1]-int64(replicas)
		return []int64{max(n, -n), k[0], max(r, -r), k[1]}
	}
	var best [2]int64
	first := true
	for k := range t.flat {
		if first || slices.Compare(dist(k), dist(best)) < 0 {
			best, first = k, false
		}
	}
	return interpPerf(t.flat[best], bsz)
}

// interpPerf interpolates linearly over local batch size, clamped.
func interpPerf(pts []perfPoint, bsz float64) (step, sync float64) {
	i, _ := slices.BinarySearchFunc(pts, bsz, func(p perfPoint, b float64) int { return cmp.Compare(p.bsz, b) })
	switch {
	case i < len(pts) && pts[i].bsz == bsz:
		return pts[i].step, pts[i].sync
	case i == 0:
		return pts[0].step, pts[0].sync
	case i == len(pts):
		return pts[i-1].step, pts[i-1].sync
	}
	p, q := pts[i-1], pts[i]
	w := (bsz - p.bsz) / (q.bsz - p.bsz)
	return p.step + w*(q.step-p.step), p.sync + w*(q.sync-p.sync)
}

// GradStats returns the gradient's squared norm and variance at total batch
// size batch in epoch e, interpolated linearly between the validated batch
// sizes (clamped to them).
func (a *App) GradStats(batch float64, e int) (sqr, variance float64) {
	e = min(max(e, 0), a.Epochs-1)
	i, _ := slices.BinarySearchFunc(a.curves, batch, func(c curve, b float64) int { return cmp.Compare(c.batch, b) })
	switch {
	case i < len(a.curves) && a.curves[i].batch == batch:
		return a.curves[i].gradSqr[e], a.curves[i].gradVars[e]
	case i == 0:
		return a.curves[0].gradSqr[e], a.curves[0].gradVars[e]
	case i == len(a.curves):
		return a.curves[i-1].gradSqr[e], a.curves[i-1].gradVars[e]
	}
	p, q := &a.curves[i-1], &a.curves[i]
	w := (batch - p.batch) / (q.batch - p.batch)
	return p.gradSqr[e] + w*(q.gradSqr[e]-p.gradSqr[e]), p.gradVars[e] + w*(q.gradVars[e]-p.gradVars[e])
}

// Efficiency returns the statistical efficiency gain of total batch size
// batch over InitBatch in epoch e: progress per iteration, in iterations at
// InitBatch. With the gradient noise scale phi = var/sqr (at InitBatch) and
// scale s = batch/InitBatch it is (phi + 1) / (phi/s + 1), which is s times
// Pollux's E(m) = (phi_m0 + m0) / (phi_m0 + m).
func (a *App) Efficiency(batch float64, e int) float64 {
	sqr, v := a.GradStats(batch, e)
	s := batch / a.InitBatch
	if d := v/s + sqr; d > 0 {
		return (v + sqr) / d
	}
	return 1
}

// placementID is the rotation of placement (zeros dropped) that reads as
// the smallest number, as Pollux's simulator names placements.
func placementID(placement []int) string {
	var b []byte
	for _, g := range placement {
		if g > 0 {
			if g > 9 {
				return "" // not a measured placement
			}
			b = append(b, byte('0'+g))
		}
	}
	best := string(b)
	for i := 1; i < len(b); i++ {
		if r := string(b[i:]) + string(b[:i]); r < best {
			best = r
		}
	}
	return best
}

func floats(f []string) ([]float64, error) {
	out := make([]float64, len(f))
	for i, s := range f {
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		out[i] = x
	}
	return out, nil
}

func minPositive(a, b float64) float64 {
	if a <= 0 {
		return b
	}
	return min(a, b)
}
