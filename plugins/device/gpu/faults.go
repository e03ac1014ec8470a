package gpu

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Fault file (simulated backend only). Re-read on every fingerprint pass;
// a missing file means no faults. One fault per line:
//
//	# comment; blank lines are ignored
//	<gpu> lost          every NVML call on the GPU returns ERROR_GPU_IS_LOST
//	<gpu> xid <code>    the GPU raises one XID critical error event <code>
//	<gpu> ecc <count>   the volatile uncorrected ECC counter reads <count>
//
// <gpu> is a GPU UUID ("GPU-...") or an NVML index ("3"). Several lines may
// name the same GPU. Removing a GPU's lines (or changing them) simulates a
// GPU reset: the GPU's faults are cleared, including its sticky XID, and
// the remaining lines are applied afresh. Malformed lines are logged and
// skipped.

// gpuFault is the set of faults injected into one simulated GPU.
type gpuFault struct {
	Lost bool
	XIDs []uint64
	ECC  uint64
}

func (f gpuFault) empty() bool { return !f.Lost && len(f.XIDs) == 0 && f.ECC == 0 }

func (f gpuFault) equal(o gpuFault) bool {
	return f.Lost == o.Lost && f.ECC == o.ECC && slices.Equal(f.XIDs, o.XIDs)
}

func (f gpuFault) merge(o gpuFault) gpuFault {
	return gpuFault{Lost: f.Lost || o.Lost, XIDs: append(slices.Clone(f.XIDs), o.XIDs...), ECC: max(f.ECC, o.ECC)}
}

// parseFaults parses fault file content into faults keyed by the <gpu>
// token as written (UUID) or normalised (index). Bad lines are returned as
// errors and otherwise ignored.
func parseFaults(content string) (map[string]gpuFault, []error) {
	faults := map[string]gpuFault{}
	var errs []error
	sc := bufio.NewScanner(strings.NewReader(content))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		target, f, err := parseFaultLine(line)
		if err != nil {
			errs = append(errs, fmt.Errorf("fault file line %d %q: %w", n, line, err))
			continue
		}
		faults[target] = faults[target].merge(f)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("failed to read fault file: %w", err))
	}
	return faults, errs
}

func parseFaultLine(line string) (string, gpuFault, error) {
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return "", gpuFault{}, errors.New("want <gpu> lost | <gpu> xid <code> | <gpu> ecc <count>")
	}
	target := fields[0]
	if !strings.HasPrefix(target, "GPU-") {
		i, err := strconv.Atoi(target)
		if err != nil || i < 0 {
			return "", gpuFault{}, fmt.Errorf("GPU %q is neither a GPU-<uuid> nor an index", target)
		}
		target = strconv.Itoa(i)
	}

	kind, args := fields[1], fields[2:]
	wantArgs := map[string]int{"lost": 0, "xid": 1, "ecc": 1}
	n, known := wantArgs[kind]
	if !known {
		return "", gpuFault{}, fmt.Errorf("unknown fault %q (want lost, xid or ecc)", kind)
	}
	if len(args) != n {
		return "", gpuFault{}, fmt.Errorf("fault %q takes %d argument(s), got %d", kind, n, len(args))
	}
	switch kind {
	case "lost":
		return target, gpuFault{Lost: true}, nil
	case "xid":
		code, err := strconv.ParseUint(args[0], 10, 64)
		if err != nil {
			return "", gpuFault{}, fmt.Errorf("xid code %q: %w", args[0], err)
		}
		return target, gpuFault{XIDs: []uint64{code}}, nil
	default: // ecc
		count, err := strconv.ParseUint(args[0], 10, 64)
		if err != nil {
			return "", gpuFault{}, fmt.Errorf("ecc count %q: %w", args[0], err)
		}
		return target, gpuFault{ECC: count}, nil
	}
}

// readFaultFile returns the file's content; a missing file reads as empty.
func readFaultFile(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("failed to read fault file: %w", err)
	}
	return string(raw), nil
}
