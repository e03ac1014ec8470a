package driver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// validate checks a task config after hclspec has decoded it (hclspec has
// already rejected unknown keys and wrong types), and fills defaults. Each
// error names the key it is about.
func (tc *TaskConfig) validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if tc.Discovery == nil {
		tc.Discovery = &DiscoveryConfig{} // no discovery block
	}
	switch tc.Role {
	case RoleLauncher:
		tc.validateLauncher(add)
	case RoleWorker:
		tc.validateWorker(add)
	case "":
		add(`role: required, "launcher" or "worker"`)
	default:
		add(`role: must be "launcher" or "worker", got %q`, tc.Role)
	}
	return errors.Join(errs...)
}

// validateWorker checks a worker's keys: no command, its group's port
// label, its slots and the modules it preloads.
func (tc *TaskConfig) validateWorker(add func(format string, a ...any)) {
	if tc.Command != "" {
		add("command: a worker runs the driver's agent, not a command; set command on the launcher")
	}
	if tc.Port == "" {
		add("port: a worker needs the label of its group's network port")
	}
	if tc.Slots < 1 {
		add("slots: must be at least 1, got %d", tc.Slots)
	}
	for i, m := range tc.Preload {
		if !validModule(m) {
			add("preload[%d]: %q is not a Python module name (dotted identifiers)", i, m)
		}
	}
}

// validateLauncher checks a launcher's keys and fills their defaults
// (launcher, min_np, discovery.provider, rdzv_port).
func (tc *TaskConfig) validateLauncher(add func(format string, a ...any)) {
	if len(tc.Preload) > 0 {
		add("preload: only a worker preloads modules")
	}
	if tc.Command == "" {
		add("command: required for a launcher (the training program horovodrun runs)")
	}
	switch tc.Launcher {
	case "":
		tc.Launcher = LauncherHorovod
	case LauncherHorovod, LauncherTorchrun:
	default:
		add(`launcher: must be "horovod" or "torchrun", got %q`, tc.Launcher)
	}
	tc.validateNP(add)
	if tc.Slots < 1 {
		add("slots: must be at least 1, got %d", tc.Slots)
	}
	if tc.Discovery.Service == "" {
		add("discovery: a launcher needs a discovery block naming its workers' service")
	}
	switch tc.Discovery.Provider {
	case "":
		tc.Discovery.Provider = ProviderConsul
	case ProviderConsul, ProviderNomad:
	default:
		add(`discovery.provider: must be "consul" or "nomad", got %q`, tc.Discovery.Provider)
	}
	if tc.ElasticTimeout < 0 {
		add("elastic_timeout: must not be negative, got %d", tc.ElasticTimeout)
	}
	if tc.ResetLimit < 0 {
		add("reset_limit: must not be negative, got %d", tc.ResetLimit)
	}
	tc.validateBlacklistCooldown(add)
	tc.validateRdzv(add)
}

// validateNP checks np, min_np (np where unset) and max_np against each
// other.
func (tc *TaskConfig) validateNP(add func(format string, a ...any)) {
	if tc.NP < 1 {
		add("np: required for a launcher and at least 1, got %d", tc.NP)
	}
	if tc.MinNP == 0 {
		tc.MinNP = tc.NP
	}
	if tc.MinNP < 1 {
		add("min_np: must be at least 1, got %d", tc.MinNP)
	}
	if tc.MinNP > tc.NP && tc.NP >= 1 {
		add("min_np (%d) must not exceed np (%d)", tc.MinNP, tc.NP)
	}
	if tc.MaxNP != 0 {
		if tc.MaxNP < tc.NP {
			add("np (%d) must not exceed max_np (%d)", tc.NP, tc.MaxNP)
		}
		if tc.MinNP > tc.MaxNP {
			add("min_np (%d) must not exceed max_np (%d)", tc.MinNP, tc.MaxNP)
		}
	}
}

// validateBlacklistCooldown checks blacklist_cooldown, if set: [min, max]
// seconds within 1 to 3600.
func (tc *TaskConfig) validateBlacklistCooldown(add func(format string, a ...any)) {
	if n := len(tc.BlacklistCooldown); n != 0 {
		if n != 2 {
			add("blacklist_cooldown: must be [min, max] seconds, got %d values", n)
		} else if lo, hi := tc.BlacklistCooldown[0], tc.BlacklistCooldown[1]; lo < 1 || hi > 3600 || lo > hi {
			add("blacklist_cooldown: must be [min, max] with 1 <= min <= max <= 3600, got [%d, %d]", lo, hi)
		}
	}
}

// validateRdzv checks where torchrun's c10d store listens: a port number
// or the label of a port of the launcher's group, not both; neither is
// DefaultRdzvPort. Only torchrun has a store.
func (tc *TaskConfig) validateRdzv(add func(format string, a ...any)) {
	if tc.Launcher != LauncherTorchrun {
		if tc.RdzvPort != 0 || tc.RdzvPortLabel != "" {
			add(`rdzv_port, rdzv_port_label: only launcher = "torchrun" has a rendezvous store`)
		}
		return
	}
	switch {
	case tc.RdzvPortLabel != "" && tc.RdzvPort != 0:
		add("rdzv_port, rdzv_port_label: set one, not both (rdzv_port %d, rdzv_port_label %q)", tc.RdzvPort, tc.RdzvPortLabel)
	case tc.RdzvPortLabel != "":
		if !validPortLabel(tc.RdzvPortLabel) {
			add("rdzv_port_label: %q is not a port label (1 to 64 letters, digits, '_' or '-')", tc.RdzvPortLabel)
		}
	case tc.RdzvPort == 0:
		tc.RdzvPort = DefaultRdzvPort
	case tc.RdzvPort < 1 || tc.RdzvPort > 65535:
		add("rdzv_port: must be a port number (1 to 65535), got %d", tc.RdzvPort)
	}
}

// validPortLabel says whether l is a network port label the driver takes.
func validPortLabel(l string) bool {
	if l == "" || len(l) > 64 {
		return false
	}
	for _, r := range l {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// fingerprintPeriod parses the plugin config's fingerprint_period.
func (c *Config) fingerprintPeriod() (time.Duration, error) {
	if c.FingerprintPeriod == "" {
		return 30 * time.Second, nil
	}
	d, err := time.ParseDuration(c.FingerprintPeriod)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("fingerprint_period: must be a positive duration, got %s", strconv.Quote(c.FingerprintPeriod))
	}
	return d, nil
}

// validModule says whether m is a dotted Python module name.
func validModule(m string) bool {
	if m == "" || len(m) > 200 {
		return false
	}
	for _, part := range strings.Split(m, ".") {
		if part == "" {
			return false
		}
		for i, r := range part {
			if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
				return false
			}
		}
	}
	return true
}

// validEnvName says whether k is a variable name (an identifier: letters,
// digits and _, not starting with a digit).
func validEnvName(k string) bool {
	return !strings.Contains(k, ".") && validModule(k)
}

// parseFenceAfter reads fence_after: a duration, "" or "0s" for none.
func parseFenceAfter(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > time.Hour {
		return 0, fmt.Errorf("fence_after: %q is not a duration between 0s and 1h", s)
	}
	return d, nil
}

// mustDuration parses a duration the code itself spells.
func mustDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}
