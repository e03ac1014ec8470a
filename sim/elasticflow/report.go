package elasticflow

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Published is ElasticFlow's Figure 8(b), deadline satisfaction ratio by
// trace and scheduler (plot_figure/scripts/plot_fig8b.py;
// ../shared/traces/elasticflow/README.md).
var Published = map[string]map[string]float64{
	"cluster01":     {"edf": 0.182, "gandiva": 0.246, "dlas-gpu": 0.478, "themis": 0.464, "chronus": 0.474, "ef-accessctrl": 0.788},
	"cluster02":     {"edf": 0.228, "gandiva": 0.286, "dlas-gpu": 0.470, "themis": 0.431, "chronus": 0.445, "ef-accessctrl": 0.822},
	"cluster03":     {"edf": 0.095, "gandiva": 0.314, "dlas-gpu": 0.401, "themis": 0.389, "chronus": 0.426, "ef-accessctrl": 0.455},
	"cluster04":     {"edf": 0.007, "gandiva": 0.228, "dlas-gpu": 0.120, "themis": 0.432, "chronus": 0.450, "ef-accessctrl": 0.631},
	"cluster05":     {"edf": 0.375, "gandiva": 0.228, "dlas-gpu": 0.420, "themis": 0.430, "chronus": 0.453, "ef-accessctrl": 0.832},
	"philly_103959": {"edf": 0.01, "gandiva": 0.15, "dlas-gpu": 0.32, "themis": 0.33, "chronus": 0.324, "ef-accessctrl": 0.87},
}

// Row is one replay in a fidelity table.
type Row struct {
	Trace string
	Spec  Spec
	Jobs  int
	*Result
	// Seconds is the replay's wall time.
	Seconds float64
}

// WriteTable writes the fidelity table: each replay's ratio beside the
// published one, bold where they are more than 0.03 apart (the goal).
func WriteTable(w io.Writer, rows []Row) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Job model: %s.\n\n", Model)
	b.WriteString("| trace | GPUs | jobs | policy | ours | published | ours - published | replay (s) |\n|---|---:|---:|---|---:|---:|---:|---:|\n")
	for _, r := range rows {
		pub, ok := Published[r.Trace][r.Policy]
		ps, ds := "", ""
		if ok {
			ps = fmt.Sprintf("%.3f", pub)
			d := r.Ratio - pub
			ds = fmt.Sprintf("%+.3f", d)
			if math.Abs(d) > 0.03+1e-9 {
				ds = "**" + ds + "**"
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %.3f | %s | %s | %.1f |\n", r.Trace, r.Spec.GPUs(), r.Jobs, r.Policy, r.Ratio, ps, ds, r.Seconds)
	}
	writeComparison(&b, rows)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeComparison writes, for the traces replayed under both, the
// planner's qoe against ElasticFlow (ours and published): issue 30's goal
// is qoe / ours >= 1.05 on every trace and qoe >= the published figure;
// bold where it is missed.
func writeComparison(b *strings.Builder, rows []Row) {
	byTrace := map[string]map[string]float64{}
	bound := map[string]float64{}
	var order []string
	for _, r := range rows {
		if byTrace[r.Trace] == nil {
			byTrace[r.Trace] = map[string]float64{}
			order = append(order, r.Trace)
		}
		byTrace[r.Trace][r.Policy] = r.Ratio
		bound[r.Trace] = float64(r.Possible) / float64(max(r.Jobs, 1))
	}
	head := false
	for _, tr := range order {
		q, ok1 := byTrace[tr][QoEName]
		ef, ok2 := byTrace[tr]["ef-accessctrl"]
		if !ok1 || !ok2 {
			continue
		}
		if !head {
			b.WriteString("\nThe planner's qoe (with its deadline admission, reject) against ElasticFlow under this job model; bold: below the goal (qoe / ef-accessctrl >= 1.05, qoe >= published ElasticFlow). Bound: the jobs that could meet their deadlines at all (alone, at their fastest power of two, no overhead) over all jobs, which no scheduler passes.\n\n")
			b.WriteString("| trace | qoe | ef-accessctrl (ours) | qoe / ef-accessctrl | published ElasticFlow | qoe - published | bound | bound / ef-accessctrl |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
			head = true
		}
		ratio := "n/a"
		if ef > 0 {
			ratio = fmt.Sprintf("%.3f", q/ef)
			if q/ef < 1.05 {
				ratio = "**" + ratio + "**"
			}
		}
		ps, ds := "", ""
		if pub, ok := Published[tr]["ef-accessctrl"]; ok {
			ps, ds = fmt.Sprintf("%.3f", pub), fmt.Sprintf("%+.3f", q-pub)
			if q < pub {
				ds = "**" + ds + "**"
			}
		}
		bb := "n/a"
		if ef > 0 {
			bb = fmt.Sprintf("%.3f", bound[tr]/ef)
		}
		fmt.Fprintf(b, "| %s | %.3f | %.3f | %s | %s | %s | %.3f | %s |\n", tr, q, ef, ratio, ps, ds, bound[tr], bb)
	}
}
