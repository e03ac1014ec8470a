package command

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfiles starts a CPU profile into cpuPath (if not empty) and
// returns the function that stops it and writes the heap profile
// (allocations since the start of the process) into memPath (if not
// empty; else the heap is not sampled at all). The files are created
// before the work starts, so a path that cannot be written fails at once.
func startProfiles(cpuPath, memPath string) (stop func() error, err error) {
	var cpu, mem *os.File
	if memPath == "" {
		// Nothing reads the heap's samples: each costs a walk of the
		// stack, and a replay's rounds allocate arrays large enough to be
		// sampled every few rounds (2% of a whole-Philly replay's CPU).
		runtime.MemProfileRate = 0
	}
	if memPath != "" {
		if mem, err = os.Create(memPath); err != nil {
			return nil, fmt.Errorf("failed to create memory profile: %w", err)
		}
	}
	if cpuPath != "" {
		if cpu, err = os.Create(cpuPath); err != nil {
			closeAll(mem)
			return nil, fmt.Errorf("failed to create CPU profile: %w", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			closeAll(mem, cpu)
			return nil, fmt.Errorf("failed to start CPU profile: %w", err)
		}
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				errs = append(errs, fmt.Errorf("failed to write CPU profile: %w", err))
			}
		}
		if mem != nil {
			runtime.GC() // up-to-date statistics
			if err := pprof.Lookup("allocs").WriteTo(mem, 0); err != nil {
				errs = append(errs, fmt.Errorf("failed to write memory profile: %w", err))
			}
			if err := mem.Close(); err != nil {
				errs = append(errs, fmt.Errorf("failed to write memory profile: %w", err))
			}
		}
		return errors.Join(errs...)
	}, nil
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}
