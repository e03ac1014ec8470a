package driver

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/schedulearn/schedulearn/driver/pyhooks"
)

// kernelPortRange is where Linux keeps the range it binds port 0 in.
const kernelPortRange = "/proc/sys/net/ipv4/ip_local_port_range"

// parsePortRange reads "LOW-HIGH" (1 <= LOW <= HIGH <= 65535).
func parsePortRange(s string) (low, high int, err error) {
	l, h, ok := strings.Cut(strings.TrimSpace(s), "-")
	if ok {
		low, err = strconv.Atoi(l)
		if err == nil {
			high, err = strconv.Atoi(h)
		}
	}
	if !ok || err != nil || low < 1 || low > high || high > 65535 {
		return 0, 0, fmt.Errorf("%q is not a port range LOW-HIGH with 1 <= LOW <= HIGH <= 65535", s)
	}
	return low, high, nil
}

// checkPortRange checks dynamic_ports: "" (no guard) or a range.
func checkPortRange(s string) error {
	if s == "" {
		return nil
	}
	_, _, err := parsePortRange(s)
	return err
}

// kernelPortsOverlap says, as an error, when the kernel's ephemeral range
// (where Gloo's and the guarded Horovod services' port-0 binds land)
// overlaps the client's dynamic ports: the guard then falls back to random
// ports outside them for Horovod, but Gloo's own listeners may still take
// one.
func kernelPortsOverlap(dynamic string) error {
	if dynamic == "" {
		return nil
	}
	kl, kh, ok := kernelEphemeralPorts()
	if !ok {
		return nil // not Linux, or not readable: nothing to say
	}
	dl, dh, err := parsePortRange(dynamic)
	if err != nil {
		return err
	}
	if kh < dl || kl > dh {
		return nil
	}
	return fmt.Errorf("the kernel's ephemeral ports %d-%d (%s) overlap the client's dynamic ports %s: set net.ipv4.ip_local_port_range or the client's min_dynamic_port/max_dynamic_port (and dynamic_ports) apart", kl, kh, kernelPortRange, dynamic)
}

// setAvoidPorts names the ports Horovod's services in a task keep out of.
func setAvoidPorts(env map[string]string, dynamic string) {
	if dynamic != "" {
		env[pyhooks.AvoidPortsEnv] = dynamic
	}
}

// kernelEphemeralPorts reads the kernel's ephemeral port range; ok is false
// where it cannot be read (not Linux) or does not hold two ports.
func kernelEphemeralPorts() (low, high int, ok bool) {
	b, err := os.ReadFile(kernelPortRange)
	if err != nil {
		return 0, 0, false
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0, 0, false
	}
	low, high, err = parsePortRange(fields[0] + "-" + fields[1])
	return low, high, err == nil
}
