package driver

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/shared"
)

// LookPathFunc finds an executable by name, as exec.LookPath does.
type LookPathFunc func(name string) (string, error)

// Fingerprint attributes.
const (
	attrHorovodrunVersion = "driver.horovod.horovodrun_version"
	attrPythonVersion     = "driver.horovod.python_version"
	attrTorchrun          = "driver.horovod.torchrun"
)

// searchPath looks name up in dirs first, then with lookPath.
func searchPath(lookPath LookPathFunc, dirs []string, name string) (string, error) {
	for _, dir := range dirs {
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return p, nil
		}
	}
	return lookPath(name)
}

// fingerprint reports the driver healthy when horovodrun and python are
// found, with their versions as attributes; undetected otherwise.
func fingerprint(ctx context.Context, lookPath LookPathFunc, dirs []string) *drivers.Fingerprint {
	fp := &drivers.Fingerprint{
		Attributes:        map[string]*shared.Attribute{},
		Health:            drivers.HealthStateUndetected,
		HealthDescription: "",
	}
	horovodrun, err := searchPath(lookPath, dirs, "horovodrun")
	if err != nil {
		fp.HealthDescription = "horovodrun not found: " + err.Error()
		return fp
	}
	python, err := findPython(lookPath, dirs)
	if err != nil {
		fp.HealthDescription = "python not found: " + err.Error()
		return fp
	}
	hv, err := commandVersion(ctx, horovodrun, "--version")
	if err != nil {
		fp.HealthDescription = "failed to run horovodrun --version: " + err.Error()
		return fp
	}
	pv, err := commandVersion(ctx, python, "--version")
	if err != nil {
		fp.HealthDescription = "failed to run python --version: " + err.Error()
		return fp
	}
	fp.Attributes[attrHorovodrunVersion] = shared.StringAttribute(hv)
	fp.Attributes[attrPythonVersion] = shared.StringAttribute(strings.TrimPrefix(pv, "Python "))
	_, err = searchPath(lookPath, dirs, "torchrun")
	fp.Attributes[attrTorchrun] = shared.BoolAttribute(err == nil)
	fp.Health = drivers.HealthStateHealthy
	fp.HealthDescription = drivers.DriverHealthy
	return fp
}

func findPython(lookPath LookPathFunc, dirs []string) (string, error) {
	p, err := searchPath(lookPath, dirs, "python3")
	if err == nil {
		return p, nil
	}
	if p, err2 := searchPath(lookPath, dirs, "python"); err2 == nil {
		return p, nil
	}
	return "", err
}

// commandVersion runs `bin arg` and returns the last line it printed.
func commandVersion(ctx context.Context, bin string, arg string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, arg).CombinedOutput()
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	v := strings.TrimSpace(lines[len(lines)-1])
	if v == "" {
		return "", errors.New("no version printed")
	}
	return v, nil
}
