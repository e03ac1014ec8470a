package gpu

import (
	"fmt"
	"os"
	"time"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
)

// Backend names accepted by the "backend" key.
const (
	BackendAuto      = "auto"
	BackendNVML      = "nvml"
	BackendSimulated = "simulated"
)

// Defaults, shared by the HCL spec and by Go when a block is absent.
const (
	defaultFingerprintPeriod = time.Minute
	defaultSimCount          = 8
	defaultSimModel          = "NVIDIA A100-SXM4-40GB"
	defaultSimMemoryMiB      = 40960
	defaultSimNUMANodes      = 2
	maxSimCount              = 64
	defaultStatsFallback     = time.Second // when Nomad passes no interval
)

// configSpec is the schema of the plugin "schedulearn-gpu" { config { ... } }
// block. README.md documents every key.
var configSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"backend": hclspec.NewDefault(
		hclspec.NewAttr("backend", "string", false), hclspec.NewLiteral(`"auto"`)),
	"fingerprint_period": hclspec.NewDefault(
		hclspec.NewAttr("fingerprint_period", "string", false), hclspec.NewLiteral(`"1m"`)),
	"stats_period": hclspec.NewDefault(
		hclspec.NewAttr("stats_period", "string", false), hclspec.NewLiteral(`""`)),
	"ignored_gpu_ids": hclspec.NewDefault(
		hclspec.NewAttr("ignored_gpu_ids", "list(string)", false), hclspec.NewLiteral("[]")),
	"allow_simulated_with_gpus": hclspec.NewDefault(
		hclspec.NewAttr("allow_simulated_with_gpus", "bool", false), hclspec.NewLiteral("false")),
	"simulated": hclspec.NewBlock("simulated", false, hclspec.NewObject(map[string]*hclspec.Spec{
		"count": hclspec.NewDefault(
			hclspec.NewAttr("count", "number", false), hclspec.NewLiteral(fmt.Sprint(defaultSimCount))),
		"model": hclspec.NewDefault(
			hclspec.NewAttr("model", "string", false), hclspec.NewLiteral(fmt.Sprintf("%q", defaultSimModel))),
		"memory_mib": hclspec.NewDefault(
			hclspec.NewAttr("memory_mib", "number", false), hclspec.NewLiteral(fmt.Sprint(defaultSimMemoryMiB))),
		"fault_file": hclspec.NewDefault(
			hclspec.NewAttr("fault_file", "string", false), hclspec.NewLiteral(`""`)),
		"uuid_seed": hclspec.NewDefault(
			hclspec.NewAttr("uuid_seed", "string", false), hclspec.NewLiteral(`""`)),
		"numa_nodes": hclspec.NewDefault(
			hclspec.NewAttr("numa_nodes", "number", false), hclspec.NewLiteral(fmt.Sprint(defaultSimNUMANodes))),
		"nvlink": hclspec.NewDefault(
			hclspec.NewAttr("nvlink", "bool", false), hclspec.NewLiteral("true")),
		"mig_gpu_indices": hclspec.NewDefault(
			hclspec.NewAttr("mig_gpu_indices", "list(number)", false), hclspec.NewLiteral("[]")),
	})),
})

// Config is the decoded plugin configuration, before validation.
type Config struct {
	Backend                string           `cty:"backend"`
	FingerprintPeriod      string           `cty:"fingerprint_period"`
	StatsPeriod            string           `cty:"stats_period"`
	IgnoredGPUIDs          []string         `cty:"ignored_gpu_ids"`
	AllowSimulatedWithGPUs bool             `cty:"allow_simulated_with_gpus"`
	Simulated              *SimulatedConfig `cty:"simulated"`
}

// SimulatedConfig is the simulated { ... } block.
type SimulatedConfig struct {
	Count         int    `cty:"count"`
	Model         string `cty:"model"`
	MemoryMiB     int    `cty:"memory_mib"`
	FaultFile     string `cty:"fault_file"`
	UUIDSeed      string `cty:"uuid_seed"` // "" means the hostname
	NUMANodes     int    `cty:"numa_nodes"`
	NVLink        bool   `cty:"nvlink"`
	MIGGPUIndices []int  `cty:"mig_gpu_indices"`
}

func defaultConfig() Config {
	return Config{Backend: BackendAuto, FingerprintPeriod: "1m"}
}

func defaultSimulatedConfig() SimulatedConfig {
	return SimulatedConfig{
		Count:     defaultSimCount,
		Model:     defaultSimModel,
		MemoryMiB: defaultSimMemoryMiB,
		NUMANodes: defaultSimNUMANodes,
		NVLink:    true,
	}
}

// settings is a validated Config.
type settings struct {
	backend                string
	fingerprintPeriod      time.Duration
	statsPeriod            time.Duration // 0: use the interval Nomad asks for
	ignored                map[string]bool
	allowSimulatedWithGPUs bool
	simulated              SimulatedConfig // defaults when the block is absent
	simulatedBlockSet      bool
}

// decodeConfig decodes the msgpack config Nomad sends (every key of
// configSpec, defaults applied by the agent); an empty payload means all
// defaults.
func decodeConfig(c *base.Config) (Config, error) {
	cfg := defaultConfig()
	if c == nil || len(c.PluginConfig) == 0 {
		return cfg, nil
	}
	if err := hclspec.Decode(configSpec, c.PluginConfig, &cfg); err != nil {
		return cfg, fmt.Errorf("failed to decode plugin config: %w", err)
	}
	return cfg, nil
}

// validate checks every key and returns the first *ConfigError found.
func (cfg Config) validate() (*settings, error) {
	s := &settings{
		backend:                cfg.Backend,
		ignored:                map[string]bool{},
		allowSimulatedWithGPUs: cfg.AllowSimulatedWithGPUs,
		simulated:              defaultSimulatedConfig(),
	}
	switch cfg.Backend {
	case BackendAuto, BackendNVML, BackendSimulated:
	default:
		return nil, &ConfigError{Key: "backend", Value: fmt.Sprintf("%q", cfg.Backend),
			Reason: `must be one of "auto", "nvml", "simulated"`}
	}

	var err error
	if s.fingerprintPeriod, err = positiveDuration("fingerprint_period", cfg.FingerprintPeriod); err != nil {
		return nil, err
	}
	if cfg.StatsPeriod != "" {
		if s.statsPeriod, err = positiveDuration("stats_period", cfg.StatsPeriod); err != nil {
			return nil, err
		}
	}
	for _, id := range cfg.IgnoredGPUIDs {
		if id == "" {
			return nil, &ConfigError{Key: "ignored_gpu_ids", Value: `""`, Reason: "GPU IDs must not be empty"}
		}
		s.ignored[id] = true
	}

	if cfg.Simulated != nil {
		if err := cfg.Simulated.validate(); err != nil {
			return nil, err
		}
		s.simulated = *cfg.Simulated
		s.simulatedBlockSet = true
	}
	if s.backend == BackendSimulated && s.simulated.UUIDSeed == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("simulated.uuid_seed is empty and the hostname is unavailable: %w", err)
		}
		s.simulated.UUIDSeed = host
	}
	return s, nil
}

func (sc SimulatedConfig) validate() error {
	if sc.Count < 1 || sc.Count > maxSimCount {
		return &ConfigError{Key: "simulated.count", Value: fmt.Sprint(sc.Count),
			Reason: fmt.Sprintf("must be between 1 and %d", maxSimCount)}
	}
	if sc.Model == "" {
		return &ConfigError{Key: "simulated.model", Value: `""`, Reason: "must not be empty"}
	}
	if sc.MemoryMiB <= 0 {
		return &ConfigError{Key: "simulated.memory_mib", Value: fmt.Sprint(sc.MemoryMiB), Reason: "must be positive"}
	}
	if sc.NUMANodes < 1 {
		return &ConfigError{Key: "simulated.numa_nodes", Value: fmt.Sprint(sc.NUMANodes), Reason: "must be at least 1"}
	}
	for _, i := range sc.MIGGPUIndices {
		if i < 0 || i >= sc.Count {
			return &ConfigError{Key: "simulated.mig_gpu_indices", Value: fmt.Sprint(sc.MIGGPUIndices),
				Reason: fmt.Sprintf("index %d is outside 0..%d", i, sc.Count-1)}
		}
	}
	return nil
}

func positiveDuration(key, raw string) (time.Duration, error) {
	d, err := time.ParseDuration(raw)
	if err != nil {
		return 0, &ConfigError{Key: key, Value: fmt.Sprintf("%q", raw), Reason: err.Error()}
	}
	if d <= 0 {
		return 0, &ConfigError{Key: key, Value: fmt.Sprintf("%q", raw), Reason: "must be positive"}
	}
	return d, nil
}
