package lab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ModulePath is the product's Go module, used to recognise the repository.
const ModulePath = "github.com/schedulearn/schedulearn"

// FindRoot walks up from dir to the repository root: the directory whose
// go.mod declares ModulePath.
func FindRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module "+ModulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("failed to find the schedulearn repository root (a go.mod declaring " + ModulePath + ") above the working directory")
		}
		dir = parent
	}
}

// DefaultConfig is the lab `make lab` runs: the binaries built into .cache/,
// the configs in jobspecs/lab, the default ports.
func DefaultConfig(root string) Config {
	return Config{
		NomadBin:  filepath.Join(root, ".cache", "bin", "nomad"),
		ConsulBin: filepath.Join(root, ".cache", "bin", "consul"),
		ConfigDir: filepath.Join(root, "jobspecs", "lab"),
		PluginDir: filepath.Join(root, ".cache", "plugins"),
		StateDir:  filepath.Join(root, ".cache", "lab"),
		Ports:     DefaultPorts(),
	}
}

// CheckBinaries says which of the lab's binaries are missing and how to
// build them.
func (c Config) CheckBinaries() error {
	bins := []string{c.ConsulBin}
	if !c.ConsulOnly {
		bins = append(bins, c.NomadBin)
	}
	var missing []error
	for _, bin := range bins {
		if _, err := os.Stat(bin); err != nil {
			missing = append(missing, fmt.Errorf("%s is missing (run `make tools`)", bin))
		}
	}
	return errors.Join(missing...)
}
