package sim

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// App is one application of the Pollux traces (apps/<name>/): its measured
// step and sync times per placement and local batch size, and its
// validation curves (progress and gradient statistics per epoch) per total
// batch size. It is read-only once loaded and shared by all its jobs.
type App struct {
	Name string
	// InitBatch is the smallest validated batch size, the reference of the
	// statistical efficiency; MaxBatch the largest.
	InitBatch, MaxBatch float64
	// MinLocal and MaxLocal bound the per-GPU (atomic) batch size.
	MinLocal, MaxLocal float64
	// Epochs is the number of epochs to the end of the validation curves.
	Epochs int

	placements map[string][]perfPoint // rotation-normalised placement -> by local batch
	shapes     map[int]*nodeLevel     // num_nodes -> replicas -> points, for other placements
	levels     []int                  // sorted keys of shapes
	curves     []curve                // by batch size
	progress   []float64              // progress[e]: progress at the end of epoch e (progress[0] = 0)
}

// perfPoint is a measured step and sync time at a local batch size.
type perfPoint struct{ bsz, step, sync float64 }

// nodeLevel holds the measurements on one number of nodes, by replicas.
type nodeLevel struct {
	replicas []int
	points   map[int][]perfPoint
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
	a := &App{Name: filepath.Base(dir), placements: make(map[string][]perfPoint), shapes: make(map[int]*nodeLevel)}
	// The mean over placements of one shape (nodes, replicas) at one local
	// batch size, as Pollux's simulator interpolates between shapes.
	type key struct{ nodes, replicas, bsz int }
	type sum struct {
		step, sync float64
		n          int
	}
	sums := make(map[key]*sum)
	add := func(k key, step, sync float64) {
		s := sums[k]
		if s == nil {
			s = &sum{}
			sums[k] = s
		}
		s.step += step
		s.sync += sync
		s.n++
	}
	placementsMax := 0.0
	err := readCSV(filepath.Join(dir, "placements.csv"), []string{"placement", "local_bsz", "step_time", "sync_time"},
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
			add(key{nodes, replicas, int(v[0])}, v[1], v[2])
			placementsMax = max(placementsMax, v[0])
			a.MinLocal = minPositive(a.MinLocal, v[0])
			return nil
		})
	if err != nil {
		return nil, err
	}
	err = readCSV(filepath.Join(dir, "scalability.csv"), []string{"num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"},
		func(_ int, f []string) error {
			v, err := floats(f)
			if err != nil {
				return err
			}
			if v[0] < 1 || v[1] < v[0] {
				return fmt.Errorf("%v nodes with %v replicas", v[0], v[1])
			}
			add(key{int(v[0]), int(v[1]), int(v[2])}, v[3], v[4])
			return nil
		})
	if err != nil {
		return nil, err
	}
	// As Pollux's simulator (applications.py): the largest local batch
	// size of placements.csv, unless it sets one for the application.
	a.MaxLocal = placementsMax
	if m, ok := polluxMaxLocal[a.Name]; ok {
		a.MaxLocal = min(placementsMax, m)
	}
	for _, pts := range a.placements {
		slices.SortFunc(pts, func(x, y perfPoint) int { return cmp.Compare(x.bsz, y.bsz) })
	}
	for k, s := range sums {
		lvl := a.shapes[k.nodes]
		if lvl == nil {
			lvl = &nodeLevel{points: make(map[int][]perfPoint)}
			a.shapes[k.nodes] = lvl
			a.levels = append(a.levels, k.nodes)
		}
		if _, ok := lvl.points[k.replicas]; !ok {
			lvl.replicas = append(lvl.replicas, k.replicas)
		}
		lvl.points[k.replicas] = append(lvl.points[k.replicas],
			perfPoint{float64(k.bsz), s.step / float64(s.n), s.sync / float64(s.n)})
	}
	slices.Sort(a.levels)
	for _, lvl := range a.shapes {
		slices.Sort(lvl.replicas)
		for _, pts := range lvl.points {
			slices.SortFunc(pts, func(x, y perfPoint) int { return cmp.Compare(x.bsz, y.bsz) })
		}
	}

	files, err := filepath.Glob(filepath.Join(dir, "validation-*.csv"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("failed to load application %s: no validation-<batch>.csv files", a.Name)
	}
	for _, path := range files {
		b := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "validation-"), ".csv")
		batch, err := strconv.Atoi(b)
		if err != nil || batch < 1 {
			return nil, fmt.Errorf("failed to load application %s: %s: batch size %q is not a positive integer", a.Name, path, b)
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
			return nil, err
		}
		if len(c.progress) == 0 {
			return nil, fmt.Errorf("failed to load application %s: %s has no epochs", a.Name, path)
		}
		a.curves = append(a.curves, c)
	}
	slices.SortFunc(a.curves, func(x, y curve) int { return cmp.Compare(x.batch, y.batch) })
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
			return nil, fmt.Errorf("failed to load application %s: progress falls at epoch %d", a.Name, e)
		}
		a.progress[e] = p
	}
	if a.MinLocal <= 0 || a.MaxLocal < a.MinLocal || a.progress[a.Epochs] <= 0 {
		return nil, fmt.Errorf("failed to load application %s: no usable measurements", a.Name)
	}
	return a, nil
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
// any other is interpolated between the measured shapes (placements.csv
// averaged by (nodes, replicas), and scalability.csv): over local batch
// size, then replicas, then nodes (at most 16, as in Pollux). Outside the
// measurements values are clamped to the nearest.
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
	nodes = min(nodes, 16)
	i, _ := slices.BinarySearch(a.levels, nodes)
	switch {
	case i < len(a.levels) && a.levels[i] == nodes:
		return a.shapes[nodes].at(replicas, bsz)
	case i == 0:
		return a.shapes[a.levels[0]].at(replicas, bsz)
	case i == len(a.levels):
		return a.shapes[a.levels[i-1]].at(replicas, bsz)
	}
	lo, hi := a.levels[i-1], a.levels[i]
	s0, y0 := a.shapes[lo].at(replicas, bsz)
	s1, y1 := a.shapes[hi].at(replicas, bsz)
	w := float64(nodes-lo) / float64(hi-lo)
	return s0 + w*(s1-s0), y0 + w*(y1-y0)
}

// at interpolates over replicas, then local batch size, on one node level.
func (l *nodeLevel) at(replicas int, bsz float64) (step, sync float64) {
	i, _ := slices.BinarySearch(l.replicas, replicas)
	switch {
	case i < len(l.replicas) && l.replicas[i] == replicas:
		return interpPerf(l.points[replicas], bsz)
	case i == 0:
		return interpPerf(l.points[l.replicas[0]], bsz)
	case i == len(l.replicas):
		return interpPerf(l.points[l.replicas[i-1]], bsz)
	}
	lo, hi := l.replicas[i-1], l.replicas[i]
	s0, y0 := interpPerf(l.points[lo], bsz)
	s1, y1 := interpPerf(l.points[hi], bsz)
	w := float64(replicas-lo) / float64(hi-lo)
	return s0 + w*(s1-s0), y0 + w*(y1-y0)
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
