package sia

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/sim"
)

// Published is one row of Sia's Table 3 (SOSP'23): averages over a trace
// family's workloads, hours.
type Published struct {
	Family, Policy    string
	AvgJCT, AvgJCTStd float64
	P99JCT, P99JCTStd float64
	Makespan          float64
	GPUHours, GPUStd  float64
}

// Table3 are the Sia and Pollux rows of Sia's Table 3 for the two trace
// families given (../shared/traces/sia/README.md).
var Table3 = []Published{
	{"philly", "Sia", 0.6, 0.1, 14.2, 1.9, 9.5, 4.0, 0.7},
	{"philly", "Pollux", 1.0, 0.1, 24.5, 7.9, 14.9, 5.6, 1.1},
	{"helios", "Sia", 0.7, 0.1, 14.9, 1.7, 10.9, 4.8, 0.7},
	{"helios", "Pollux", 1.0, 0.2, 25.5, 8.0, 15.0, 5.9, 0.7},
}

// published returns the row of family and policy.
func published(family, pol string) (Published, bool) {
	for _, p := range Table3 {
		if p.Family == family && p.Policy == pol {
			return p, true
		}
	}
	return Published{}, false
}

// Entry is one policy of a comparison: its name (a builtin's, or one
// host.Registry opens), its configuration, whether it is run as Sia ran
// its heterogeneity-unaware baselines (Config's unaware), and the row of
// Table3 it is compared with.
type Entry struct {
	Policy  string
	Config  map[string]string
	Unaware bool
	Anchor  string
	New     func() (policy.Policy, error) `json:"-"`
}

// Row is one policy on one trace family: the means over its workloads.
type Row struct {
	Family, Policy, Anchor string
	Workloads              int
	AvgJCT, AvgJCTStd      float64 // hours: the mean over workloads of each one's average JCT
	P99JCT, P99JCTStd      float64 // hours
	Makespan               float64 // hours
	GPUHours, GPUStd       float64 // GPU-hours a job
	Restarts               float64 // a job
	Seconds                float64 // the replays' wall time
}

// Compare replays every workload of each family (workloads/<family>/
// workload-*.csv under dir) with each entry on the cluster of groups and
// returns a row per family and entry.
func Compare(ctx context.Context, dir string, families []string, prof *Profiles, groups []sim.NodeGroup, entries []Entry, progress io.Writer) ([]Row, error) {
	var rows []Row
	for _, fam := range families {
		files, err := filepath.Glob(filepath.Join(dir, fam, "workload-*.csv"))
		if err != nil || len(files) == 0 {
			return nil, fmt.Errorf("failed to compare: no workload-*.csv in %s", filepath.Join(dir, fam))
		}
		slices.SortFunc(files, func(a, b string) int { return strings.Compare(workloadKey(a), workloadKey(b)) })
		for _, e := range entries {
			row := Row{Family: fam, Policy: e.Policy, Anchor: e.Anchor, Workloads: len(files)}
			var avg, p99, mk, gh, rs []float64
			start := time.Now()
			for _, f := range files {
				p, err := e.New()
				if err != nil {
					return nil, err
				}
				_, res, err := RunWorkload(ctx, f, prof, groups, p, e.Unaware)
				if err != nil {
					return nil, err
				}
				avg = append(avg, res.JCT.Mean/3600)
				p99 = append(p99, res.JCT.P99/3600)
				mk = append(mk, res.Makespan/3600)
				gh = append(gh, res.GPUSecondsPerJob/3600)
				rs = append(rs, res.Restarts.Mean)
				if progress != nil {
					fmt.Fprintf(progress, "%s %s %s: avg JCT %.2f h, p99 %.2f h, makespan %.2f h, %.2f GPU-hours a job\n",
						fam, filepath.Base(f), e.Policy, res.JCT.Mean/3600, res.JCT.P99/3600, res.Makespan/3600, res.GPUSecondsPerJob/3600)
				}
			}
			row.Seconds = time.Since(start).Seconds()
			row.AvgJCT, row.AvgJCTStd = meanStd(avg)
			row.P99JCT, row.P99JCTStd = meanStd(p99)
			row.Makespan, _ = meanStd(mk)
			row.GPUHours, row.GPUStd = meanStd(gh)
			row.Restarts, _ = meanStd(rs)
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// workloadKey orders workload-2 before workload-10.
func workloadKey(path string) string {
	n := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "workload-"), ".csv")
	return fmt.Sprintf("%08s", n)
}

// meanStd returns the mean and the (population) standard deviation.
func meanStd(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	m := s / float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return m, math.Sqrt(v / float64(len(xs)))
}

// WriteTable writes rows beside the published rows of their anchors, and
// each ratio to the anchor; a figure worse than its anchor (above it) is
// in bold.
func WriteTable(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| trace | policy | avg JCT (h) | p99 JCT (h) | makespan (h) | GPU-hours a job | restarts a job |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	cell := func(v, std, pub float64, have bool) string {
		s := fmt.Sprintf("%.2f", v)
		if std > 0 {
			s += fmt.Sprintf(" ± %.2f", std)
		}
		if have && pub > 0 {
			r := v / pub
			if r > 1.0005 {
				return fmt.Sprintf("**%s (%.2fx)**", s, r)
			}
			return fmt.Sprintf("%s (%.2fx)", s, r)
		}
		return s
	}
	for _, fam := range families(rows) {
		for _, anchor := range []string{"Sia", "Pollux"} {
			if p, ok := published(fam, anchor); ok {
				fmt.Fprintf(&b, "| %s | %s (published) | %.1f ± %.1f | %.1f ± %.1f | %.1f | %.1f ± %.1f | |\n",
					fam, anchor, p.AvgJCT, p.AvgJCTStd, p.P99JCT, p.P99JCTStd, p.Makespan, p.GPUHours, p.GPUStd)
			}
		}
		for _, r := range rows {
			if r.Family != fam {
				continue
			}
			p, have := published(fam, r.Anchor)
			name := r.Policy
			if r.Anchor != "" {
				name += " vs " + r.Anchor
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %.1f |\n", fam, name,
				cell(r.AvgJCT, r.AvgJCTStd, p.AvgJCT, have), cell(r.P99JCT, r.P99JCTStd, p.P99JCT, have),
				cell(r.Makespan, 0, p.Makespan, have), cell(r.GPUHours, r.GPUStd, p.GPUHours, have), r.Restarts)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func families(rows []Row) []string {
	var out []string
	for _, r := range rows {
		if !slices.Contains(out, r.Family) {
			out = append(out, r.Family)
		}
	}
	return out
}
