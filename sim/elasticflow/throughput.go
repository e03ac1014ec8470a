package elasticflow

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/schedulearn/schedulearn/sim"
)

// MaxColumns is the number of GPU-count columns a throughput table can
// have: 1, 2, 4, ... 2^(MaxColumns-1).
const MaxColumns = 21

// Throughputs is ElasticFlow's measured throughput, in iterations per
// second, of each model by global batch size and power-of-two GPU count
// (ElasticFlow/scheduler/throughputs_A100/<model>.csv, read by
// profiles.py, parse_throughput_file).
type Throughputs struct {
	// rates[model][batch][k] is the rate on 2^k GPUs; 0 where not measured
	// (an empty cell or "nan").
	rates map[string]map[int][]float64
	// listed[model][batch][k]: the cell is not "nan". ElasticFlow's
	// baselines take a job's largest GPU count from these (jobs.py,
	// add_job, compares the cell with "nan" only, so an empty cell or a
	// zero counts).
	listed map[string]map[int][]bool
}

// LoadThroughputs reads every <model>.csv in dir.
func LoadThroughputs(dir string) (*Throughputs, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.csv"))
	if err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("failed to read throughputs: no .csv file in %s", dir)
	}
	tp := &Throughputs{rates: map[string]map[int][]float64{}, listed: map[string]map[int][]bool{}}
	for _, p := range paths {
		if err := tp.load(p); err != nil {
			return nil, err
		}
	}
	return tp, nil
}

func (tp *Throughputs) load(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", path, err)
	}
	model := strings.TrimSuffix(filepath.Base(path), ".csv")
	rows := map[int][]float64{}
	listed := map[int][]bool{}
	var cols int
	for i, text := range strings.Split(string(data), "\n") {
		line := i + 1
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		f := split(text)
		if line == 1 {
			if len(f) < 2 || f[0] != "global_batch_size" || len(f)-1 > MaxColumns {
				return &sim.ParseError{Path: path, Line: 1, Err: fmt.Errorf("header is %q, want global_batch_size and then 1,2,4,8 and so on (at most %d GPU columns)", text, MaxColumns)}
			}
			for k, c := range f[1:] {
				if c != strconv.Itoa(1<<k) {
					return &sim.ParseError{Path: path, Line: 1, Err: fmt.Errorf("column %d is %q, want %d", k+2, c, 1<<k)}
				}
			}
			cols = len(f) - 1
			continue
		}
		if len(f) != cols+1 {
			return &sim.ParseError{Path: path, Line: line, Err: fmt.Errorf("%d fields, want %d", len(f), cols+1)}
		}
		batch, err := whole("global_batch_size", f[0], 1, sim.MaxBatch)
		if err != nil {
			return &sim.ParseError{Path: path, Line: line, Err: err}
		}
		r, b := make([]float64, cols), make([]bool, cols)
		for k, c := range f[1:] {
			b[k] = c != "nan"
			if c == "" || c == "nan" {
				continue
			}
			x, err := strconv.ParseFloat(c, 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				return &sim.ParseError{Path: path, Line: line, Err: fmt.Errorf("throughput %q on %d GPUs is not a non-negative number", c, 1<<k)}
			}
			r[k] = x
		}
		rows[int(batch)], listed[int(batch)] = r, b
	}
	if cols == 0 {
		return &sim.ParseError{Path: path, Err: fmt.Errorf("empty file")}
	}
	tp.rates[model], tp.listed[model] = rows, listed
	return nil
}

// HasModel says whether model has a table.
func (tp *Throughputs) HasModel(model string) bool { _, ok := tp.rates[model]; return ok }

// Models lists the models, sorted.
func (tp *Throughputs) Models() []string {
	m := make([]string, 0, len(tp.rates))
	for k := range tp.rates {
		m = append(m, k)
	}
	slices.Sort(m)
	return m
}

// Rate is the throughput of (model, batch) on gpus GPUs in iterations per
// second; 0 where it was not measured, gpus is not a power of two, or is 0.
func (tp *Throughputs) Rate(model string, batch, gpus int) float64 {
	if gpus <= 0 || gpus&(gpus-1) != 0 {
		return 0
	}
	r := tp.rates[model][batch]
	k := bits.TrailingZeros(uint(gpus))
	if k >= len(r) {
		return 0
	}
	return r[k]
}

// MaxGPUsBaseline is the largest GPU count ElasticFlow's baselines give a
// job (jobs.py, add_job, for every schedule but ef and ef-accessctrl): the
// largest column whose cell is not "nan", at most 64 and at most the batch
// size.
func (tp *Throughputs) MaxGPUsBaseline(model string, batch int) int {
	m := 0
	for k, ok := range tp.listed[model][batch] {
		if ok {
			m = 1 << k
		}
	}
	return min(m, 64, batch)
}

// MaxGPUsElastic is the largest GPU count ElasticFlow gives a job
// (models.py, get_max_gpu, A100): the batch size for deepspeech2; 16 for
// gpt2 at 128 and 32 at 256; 8 for bert at 64, else 16; 16 for
// inception3 at 64 and 32 at 128; 32 for resnet50 at 64; 32 for vgg16 at
// 64; otherwise min(batch, 64).
func MaxGPUsElastic(model string, batch int) int {
	switch {
	case model == "deepspeech2":
		return batch
	case model == "gpt2" && batch == 128:
		return 16
	case model == "gpt2" && batch == 256:
		return 32
	case model == "bert" && batch == 64:
		return 8
	case model == "bert":
		return 16
	case model == "inception3" && batch == 64:
		return 16
	case model == "inception3" && batch == 128:
		return 32
	case model == "resnet50" && batch == 64:
		return 32
	case model == "vgg16" && batch == 64:
		return 32
	}
	return min(batch, 64)
}
