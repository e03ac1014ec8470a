package sim

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// The plots are hand-written SVG: a frame, 1-2-5 ticks (or powers of ten),
// polylines per series, and a legend.

const (
	plotW, plotH                         = 900, 480
	marginL, marginR, marginT, marginB   = 70, 170, 40, 50
	innerW, innerH                       = plotW - marginL - marginR, plotH - marginT - marginB
	fontStyle                            = `font-family="sans-serif" font-size="12"`
	ganttW, ganttRowH, ganttMaxRows      = 1000, 4, 64
	ganttMarginL, ganttMarginT, ganttBot = 60, 40, 40
)

// palette is a colour per series (policy), in order.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// series is one line of a chart.
type series struct {
	name   string
	xs, ys []float64
	step   bool // draw as a step function
}

// axis maps values to pixels.
type axis struct {
	lo, hi float64
	log    bool
	px     float64 // length in pixels
}

func (a axis) pos(v float64) float64 {
	if a.log {
		v = math.Log10(max(v, a.lo))
		return (v - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo)) * a.px
	}
	return (v - a.lo) / (a.hi - a.lo) * a.px
}

// ticks returns tick values: 1-2-5 steps, or powers of ten on a log axis.
func (a axis) ticks() []float64 {
	var out []float64
	if a.log {
		for e := math.Floor(math.Log10(a.lo)); e <= math.Ceil(math.Log10(a.hi)); e++ {
			if v := math.Pow(10, e); v >= a.lo*0.999 && v <= a.hi*1.001 {
				out = append(out, v)
			}
		}
		return out
	}
	span := a.hi - a.lo
	if span <= 0 {
		return []float64{a.lo}
	}
	raw := span / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	for v := math.Ceil(a.lo/step) * step; v <= a.hi+step*1e-9; v += step {
		out = append(out, v)
	}
	return out
}

func fmtTick(v float64) string {
	switch av := math.Abs(v); {
	case av >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case av >= 1e4:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", math.Round(v*1000)/1000)
}

// lineChart writes an SVG line chart.
func lineChart(w io.Writer, title, xlabel, ylabel string, x, y axis, ss []series) error {
	b := bufio.NewWriter(w)
	x.px, y.px = innerW, innerH
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s>`+"\n",
		plotW, plotH, plotW, plotH, fontStyle)
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", marginL, esc(title))
	fmt.Fprintf(b, `<g transform="translate(%d,%d)">`+"\n", marginL, marginT)
	for _, v := range x.ticks() {
		px := x.pos(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="0" x2="%.1f" y2="%d" stroke="#e5e5e5"/>`, px, px, innerH)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px, innerH+16, fmtTick(v))
	}
	for _, v := range y.ticks() {
		py := innerH - y.pos(v)
		fmt.Fprintf(b, `<line x1="0" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`, py, innerW, py)
		fmt.Fprintf(b, `<text x="-6" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", py, fmtTick(v))
	}
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="none" stroke="black"/>`+"\n", innerW, innerH)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", innerW/2, innerH+36, esc(xlabel))
	fmt.Fprintf(b, `<text transform="translate(-50,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", innerH/2, esc(ylabel))
	for i, s := range ss {
		color := palette[i%len(palette)]
		var pts strings.Builder
		prevY := math.NaN()
		for k := range s.xs {
			px := x.pos(min(max(s.xs[k], x.lo), x.hi))
			py := innerH - y.pos(min(max(s.ys[k], y.lo), y.hi))
			if s.step && !math.IsNaN(prevY) {
				fmt.Fprintf(&pts, "%.1f,%.1f ", px, prevY)
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", px, py)
			prevY = py
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`+"\n", color, strings.TrimSpace(pts.String()))
		ly := 10 + 18*i
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`, innerW+14, ly, innerW+34, ly, color)
		fmt.Fprintf(b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", innerW+40, ly, esc(s.name))
	}
	fmt.Fprint(b, "</g>\n</svg>\n")
	return b.Flush()
}

// JCTCDF writes the CDF of job completion times, a line per run.
func JCTCDF(w io.Writer, title string, runs []*Result) error {
	lo, hi := math.Inf(1), 0.0
	for _, r := range runs {
		for _, v := range r.JCTs {
			if v > 0 {
				lo = min(lo, v)
			}
			hi = max(hi, v)
		}
	}
	if hi <= 0 {
		lo, hi = 1, 10
	}
	logX := hi/lo > 100
	x := axis{lo: 0, hi: hi}
	if logX {
		x = axis{lo: math.Pow(10, math.Floor(math.Log10(lo))), hi: math.Pow(10, math.Ceil(math.Log10(hi))), log: true}
	}
	var ss []series
	for _, r := range runs {
		s := series{name: r.Policy}
		for _, p := range cdf(r.JCTs, 400) {
			s.xs = append(s.xs, p[0])
			s.ys = append(s.ys, p[1])
		}
		ss = append(ss, s)
	}
	label := "job completion time (s)"
	if logX {
		label += ", log scale"
	}
	return lineChart(w, title, label, "fraction of jobs", x, axis{lo: 0, hi: 1}, ss)
}

// cdf returns up to n points (value, fraction of values <= it) of sorted xs.
func cdf(xs []float64, n int) [][2]float64 {
	if len(xs) == 0 {
		return nil
	}
	var out [][2]float64
	step := max(1, len(xs)/n)
	for i := 0; i < len(xs); i += step {
		out = append(out, [2]float64{xs[i], float64(i+1) / float64(len(xs))})
	}
	if last := len(xs) - 1; out[len(out)-1][0] != xs[last] || out[len(out)-1][1] != 1 {
		out = append(out, [2]float64{xs[last], 1})
	}
	return out
}

// Utilization writes the GPUs held over time (time-weighted means over
// bins), a line per run.
func Utilization(w io.Writer, title string, gpus int, runs []*Result) error {
	end := 0.0
	for _, r := range runs {
		if n := len(r.Util); n > 0 {
			end = max(end, r.Util[n-1].T)
		}
	}
	hours := end / 3600
	var ss []series
	for _, r := range runs {
		s := series{name: r.Policy, step: true}
		for _, p := range binUtil(r.Util, end, 400) {
			s.xs = append(s.xs, p.T/3600)
			s.ys = append(s.ys, p.mean)
		}
		ss = append(ss, s)
	}
	return lineChart(w, title, "time (hours)", fmt.Sprintf("GPUs held (of %d)", gpus),
		axis{lo: 0, hi: max(hours, 1e-3)}, axis{lo: 0, hi: float64(gpus)}, ss)
}

type binPoint struct {
	T    float64
	mean float64
}

// binUtil averages the step function util over n equal bins of [0, end].
func binUtil(util []UtilPoint, end float64, n int) []binPoint {
	if len(util) == 0 || end <= 0 {
		return nil
	}
	width := end / float64(n)
	out := make([]binPoint, n)
	sums := make([]float64, n)
	for i, p := range util {
		to := end
		if i+1 < len(util) {
			to = util[i+1].T
		}
		b0, b1 := min(int(p.T/width), n-1), min(int(to/width), n-1)
		for b := b0; b <= b1; b++ {
			lo, hi := max(p.T, float64(b)*width), min(to, float64(b+1)*width)
			if b == n-1 {
				hi = to
			}
			if hi > lo {
				sums[b] += float64(p.Busy) * (hi - lo)
			}
		}
	}
	for b := range out {
		out[b] = binPoint{T: float64(b) * width, mean: sums[b] / width}
	}
	return out
}

// Gantt writes which job holds each GPU over time. With more than 64 GPUs
// it shows every k-th GPU; each row is drawn as 1,000 time bins coloured by
// the job that holds the GPU longest in the bin.
func Gantt(w io.Writer, title string, gpus int, r *Result) error {
	stride := (gpus + ganttMaxRows - 1) / ganttMaxRows
	rows := (gpus + stride - 1) / stride
	end := r.Start
	for _, s := range r.Segments {
		end = max(end, s.End)
	}
	span := max(end, 1)
	// best[row][bin]: the job covering the bin longest, and for how long.
	bestJob := make([][]int32, rows)
	bestLen := make([][]float32, rows)
	for i := range bestJob {
		bestJob[i] = make([]int32, ganttW)
		for k := range bestJob[i] {
			bestJob[i][k] = -1
		}
		bestLen[i] = make([]float32, ganttW)
	}
	width := span / ganttW
	for _, s := range r.Segments {
		if int(s.GPU)%stride != 0 {
			continue
		}
		row := int(s.GPU) / stride
		for b := max(0, int(s.Start/width)); b < ganttW && float64(b)*width < s.End; b++ {
			cover := min(s.End, float64(b+1)*width) - max(s.Start, float64(b)*width)
			if c := float32(cover); c > bestLen[row][b] {
				bestLen[row][b], bestJob[row][b] = c, s.Job
			}
		}
	}
	height := ganttMarginT + rows*ganttRowH + ganttBot
	totalW := ganttMarginL + ganttW + 20
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s shape-rendering="crispEdges">`+"\n",
		totalW, height, totalW, height, fontStyle)
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="white"/>`+"\n", totalW, height)
	sub := ""
	if stride > 1 {
		sub = fmt.Sprintf(" (every %d GPUs)", stride)
	}
	fmt.Fprintf(b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s%s</text>`+"\n", ganttMarginL, esc(title), sub)
	fmt.Fprintf(b, `<g transform="translate(%d,%d)">`+"\n", ganttMarginL, ganttMarginT)
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="#f4f4f4"/>`+"\n", ganttW, rows*ganttRowH)
	for row := range rows {
		y := row * ganttRowH
		for k := 0; k < ganttW; {
			j := bestJob[row][k]
			e := k + 1
			for e < ganttW && bestJob[row][e] == j {
				e++
			}
			if j >= 0 {
				fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`, k, y, e-k, ganttRowH, jobColor(j))
			}
			k = e
		}
		if stride*row%(max(1, rows/8)*stride) == 0 {
			fmt.Fprintf(b, `<text x="-6" y="%d" text-anchor="end" dominant-baseline="middle">GPU %d</text>`, y+ganttRowH/2, row*stride)
		}
		fmt.Fprintln(b) // a failed write sticks to b: Flush returns it
	}
	x := axis{lo: 0, hi: span / 3600, px: ganttW}
	for _, v := range x.ticks() {
		px := x.pos(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>`, px, rows*ganttRowH, px, rows*ganttRowH+4)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px, rows*ganttRowH+18, fmtTick(v))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">time (hours); colour = job</text>`+"\n", ganttW/2, rows*ganttRowH+34)
	fmt.Fprint(b, "</g>\n</svg>\n")
	return b.Flush()
}

// jobColor is a stable colour per job.
func jobColor(j int32) string {
	h := (uint32(j) * 2654435761) >> 16 % 360
	l := 45 + (uint32(j)*40503)>>8%20
	return fmt.Sprintf("hsl(%d,65%%,%d%%)", h, l)
}

func esc(s string) string { return html.EscapeString(s) }
