package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The multi-host lab's network: one Linux bridge in the root namespace and,
// for each host, a network namespace joined to it by a veth pair (eth0 in
// the namespace). Lab n uses the subnet 10.213.n.0/24 (the bridge is .1, the
// hosts .2, .3, ...), the bridge slb<n>, the namespaces sl<n>-<host> and
// the root-side links slv<n>-<i>. Nothing routes beyond the bridge: the
// hosts reach each other and the root namespace's bridge address only.
const (
	// netPrefix is the /16 inside 10.0.0.0/8 the labs take their /24s from.
	netPrefix = "10.213"
	// maxLabs is how many multi-host labs can run on one machine at once.
	maxLabs = 64
	// claimDir holds one file per running lab (its index), naming the
	// process that owns it, so a lab whose process died can be cleaned up.
	claimDir = "/run/schedulearn-lab"
)

// ErrNoNetns says the machine cannot run a multi-host lab: not root, or no
// `ip` (iproute2) or `unshare` (util-linux).
var ErrNoNetns = errors.New("multi-host labs need root and iproute2 (ip) and util-linux (unshare)")

// CheckNetns says whether this process can create the lab's network.
func CheckNetns() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: not running as root", ErrNoNetns)
	}
	for _, bin := range []string{"ip", "unshare"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%w: %s not found", ErrNoNetns, bin)
		}
	}
	return nil
}

// network is one lab's bridge and namespaces.
type network struct {
	index  int
	bridge string
	hosts  []string // namespaces, in host order
	links  []string // root-side veth ends
}

func (n *network) subnet() string { return fmt.Sprintf("%s.%d.0/24", netPrefix, n.index) }

func namespaceName(index int, host string) string { return fmt.Sprintf("sl%d-%s", index, host) }

// claimNetwork takes the first free lab index: one no live process owns.
// A claim whose owner has died is cleaned up (its namespaces and bridge
// removed) and taken.
func claimNetwork() (*network, error) {
	if err := os.MkdirAll(claimDir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create %s: %w", claimDir, err)
	}
	for i := range maxLabs {
		path := filepath.Join(claimDir, strconv.Itoa(i))
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if errors.Is(err, os.ErrExist) {
			if ownerAlive(path) {
				continue
			}
			// A lab that died without cleaning up: remove what it left.
			removeNetwork(i)
			os.Remove(path)
			f, err = os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		}
		if err != nil {
			continue // another lab took it meanwhile
		}
		fmt.Fprintf(f, "%d %s\n", os.Getpid(), procStart(os.Getpid()))
		f.Close()
		removeNetwork(i) // leftovers of a lab whose claim file was lost
		return &network{index: i, bridge: "slb" + strconv.Itoa(i)}, nil
	}
	return nil, fmt.Errorf("failed to find a free lab network: %d labs are running", maxLabs)
}

// ownerAlive says whether the process named in a claim file still runs.
func ownerAlive(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return false
	}
	return procStart(pid) == f[1]
}

// procStart is a process's start time (to tell it from a reused pid), or
// "" when it is not running.
func procStart(pid int) string {
	st, ok := readStat(pid)
	if !ok || st.zombie {
		return ""
	}
	return st.start
}

// create makes the bridge and one namespace per host, with addresses.
func (n *network) create(ctx context.Context, hosts []Host, bridgeAddr string, prefixLen int) error {
	cidr := func(addr string) string { return addr + "/" + strconv.Itoa(prefixLen) }
	steps := [][]string{
		{"link", "add", n.bridge, "type", "bridge"},
		{"addr", "add", cidr(bridgeAddr), "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	}
	if err := runIPs(ctx, steps); err != nil {
		return err
	}
	for i, h := range hosts {
		ns := namespaceName(n.index, h.Name)
		link := fmt.Sprintf("slv%d-%d", n.index, i)
		n.hosts = append(n.hosts, ns)
		n.links = append(n.links, link)
		if err := writeHosts(ns, hosts); err != nil {
			return err
		}
		steps := [][]string{
			{"netns", "add", ns},
			{"link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"link", "set", link, "master", n.bridge, "up"},
			{"-n", ns, "addr", "add", cidr(h.Address), "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
			{"-n", ns, "link", "set", "lo", "up"},
		}
		if err := runIPs(ctx, steps); err != nil {
			return fmt.Errorf("failed to create host %s: %w", h.Name, err)
		}
	}
	return nil
}

// setLink takes a host's link to the bridge up or down.
func (n *network) setLink(ctx context.Context, i int, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return runIPs(ctx, [][]string{{"link", "set", n.links[i], state}})
}

// killNamespace kills every process in a host's namespace (its agents and
// the tasks they started), as a host that loses power.
func killNamespace(ns string) {
	for range 20 {
		out, err := exec.Command("ip", "netns", "pids", ns).Output()
		if err != nil {
			return
		}
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// destroy kills what runs in the namespaces and removes them, the links
// and the bridge, and releases the claim.
func (n *network) destroy() {
	removeNetwork(n.index)
	os.Remove(filepath.Join(claimDir, strconv.Itoa(n.index)))
}

// removeNetwork removes lab index's namespaces (killing what runs in them),
// root-side links and bridge, whoever made them.
func removeNetwork(index int) {
	prefix := fmt.Sprintf("sl%d-", index)
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || !strings.HasPrefix(f[0], prefix) {
				continue
			}
			killNamespace(f[0])
			_ = exec.Command("ip", "netns", "del", f[0]).Run()
		}
	}
	if dirs, err := filepath.Glob(filepath.Join(netnsEtc, prefix+"*")); err == nil {
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
	}
	linkPrefix := fmt.Sprintf("slv%d-", index)
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if strings.HasPrefix(name, linkPrefix) {
				_ = exec.Command("ip", "link", "del", name).Run()
			}
		}
	}
	_ = exec.Command("ip", "link", "del", "slb"+strconv.Itoa(index)).Run()
}

func runIPs(ctx context.Context, steps [][]string) error {
	for _, args := range steps {
		cmd := exec.CommandContext(ctx, "ip", args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("failed to run ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
		}
	}
	return nil
}

// inNamespace is the command line that runs bin with args in network
// namespace ns with hostname host (its own UTS namespace), as that host's
// agents see the world. `ip netns exec` also gives it /etc/netns/<ns>/hosts
// as /etc/hosts (in a mount namespace of its own), so every lab host's name
// resolves there: Gloo resolves its own host's name. ip, unshare and sh
// exec, so the agent keeps the pid the lab started.
func inNamespace(ns, host, bin string, args ...string) (string, []string) {
	ip, err := exec.LookPath("ip")
	if err != nil {
		ip = "ip"
	}
	argv := []string{"netns", "exec", ns, "unshare", "--uts", "--",
		"/bin/sh", "-c", `hostname "$0" && exec "$@"`, host, bin}
	return ip, append(argv, args...)
}

// netnsEtc is where `ip netns exec` finds files it binds over /etc.
const netnsEtc = "/etc/netns"

// writeHosts writes the hosts file of namespace ns: loopback and every host
// of the lab by name.
func writeHosts(ns string, hosts []Host) error {
	dir := filepath.Join(netnsEtc, ns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", dir, err)
	}
	var b strings.Builder
	b.WriteString("# Written by the schedulearn lab for this namespace.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	for _, h := range hosts {
		fmt.Fprintf(&b, "%s\t%s\n", h.Address, h.Name)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("failed to write the hosts file of %s: %w", ns, err)
	}
	return nil
}
