package builtin

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Version is the version of the builtin policies.
const Version = "0.1.0"

// checkKeys returns an error naming the keys of config that are not known.
func checkKeys(config map[string]string, known ...string) error {
	var unknown []string
	for k := range config {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fmt.Errorf("unknown config key(s) %s; known: %s",
		strings.Join(unknown, ", "), strings.Join(known, ", "))
}

// StartSize is how many GPUs the non-elastic builtins give a job with a
// range when they start it.
type StartSize string

const (
	// StartLargest starts a job with the largest count in [Min, Max] that
	// fits now (so a fixed-count job gets exactly its count).
	StartLargest StartSize = "largest"
	// StartMin starts a job with Min GPUs.
	StartMin StartSize = "min"
)

func parseStartSize(config map[string]string) (StartSize, error) {
	v, ok := config["start_size"]
	if !ok {
		return StartLargest, nil
	}
	switch s := StartSize(v); s {
	case StartLargest, StartMin:
		return s, nil
	default:
		return "", fmt.Errorf("start_size: %q is neither %q nor %q", v, StartLargest, StartMin)
	}
}

// Bounds on the builtins' durations: a longer one is a mistake (a
// cooldown of 2562047h never ends), refused with the key that holds it.
const (
	// MaxResizeCooldown bounds resize_cooldown (and goodput-jct's
	// restart_cost): a job resized at most once a day.
	MaxResizeCooldown = 24 * time.Hour
	// MaxAging bounds goodput-jct's aging.
	MaxAging = 30 * 24 * time.Hour
)

// cooldownConfig reads the resize_cooldown key of the elastic builtins.
func cooldownConfig(name string, config map[string]string, known ...string) (time.Duration, error) {
	if err := checkKeys(config, append([]string{"resize_cooldown"}, known...)...); err != nil {
		return 0, fmt.Errorf("failed to configure %s: %w", name, err)
	}
	return durationConfig(name, config, "resize_cooldown", 0, MaxResizeCooldown)
}

// durationConfig reads key of config as a duration in [0, most] (def when
// absent).
func durationConfig(name string, config map[string]string, key string, def, most time.Duration) (time.Duration, error) {
	v, ok := config[key]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > most {
		return 0, fmt.Errorf("failed to configure %s: %s: %q is not a duration from 0s to %s", name, key, v, most)
	}
	return d, nil
}

// floatConfig reads key of config as a finite number for which ok holds
// (def when absent); want says what ok asks, for the error.
func floatConfig(name string, config map[string]string, key string, def float64, ok func(float64) bool, want string) (float64, error) {
	v, set := config[key]
	if !set {
		return def, nil
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || !finite(x) || !ok(x) {
		return 0, fmt.Errorf("failed to configure %s: %s: %q is not %s", name, key, v, want)
	}
	return x, nil
}

// finite: neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
