// Command pluginbench compares a Nomad plugin binary built from this tree
// with the same binary built from another revision: file size, and start-up
// time, from exec to the go-plugin handshake line on stdout (what the agent
// waits for before its first RPC).
//
//	go run ./tools/pluginbench [-base main] [-n 20] [-pkg ./cmd/schedulearn-gpu]
//
// `make bench-plugins` runs it. Both binaries are built in one run, with the
// same toolchain and flags, and started alternately so that machine noise
// falls on both.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The agent's handshake cookie (internal/nomadplugin/base.Handshake); kept
// literal so that this tool builds against either revision's tree.
const cookie = "NOMAD_PLUGIN_MAGIC_COOKIE=e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255"

func main() {
	base := flag.String("base", "main", "the git revision to compare with")
	n := flag.Int("n", 20, "start-ups of each binary")
	pkg := flag.String("pkg", "./cmd/schedulearn-gpu", "the plugin's main package")
	flag.Parse()
	if err := run(*base, *pkg, *n); err != nil {
		fmt.Fprintln(os.Stderr, "pluginbench:", err)
		os.Exit(1)
	}
}

type binary struct {
	label string
	path  string
	size  int64
	times []time.Duration
}

func run(base, pkg string, n int) error {
	tmp, err := os.MkdirTemp("", "pluginbench")
	if err != nil {
		return fmt.Errorf("failed to make a temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)

	rev, err := output("", "git", "rev-parse", "--short", base)
	if err != nil {
		return err
	}
	src := filepath.Join(tmp, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return err
	}
	if _, err := output("", "sh", "-c", fmt.Sprintf("git archive --format=tar %s | tar -x -C %s", rev, src)); err != nil {
		return err
	}
	before := &binary{label: base + " (" + rev + ")", path: filepath.Join(tmp, "before")}
	after := &binary{label: "this tree", path: filepath.Join(tmp, "after")}
	if _, err := output(src, "go", "build", "-o", before.path, pkg); err != nil {
		return err
	}
	if _, err := output("", "go", "build", "-o", after.path, pkg); err != nil {
		return err
	}
	bins := []*binary{before, after}
	for _, b := range bins {
		fi, err := os.Stat(b.path)
		if err != nil {
			return err
		}
		b.size = fi.Size()
	}
	for i := range n {
		for j := range bins {
			b := bins[(i+j)%2] // alternate which one goes first
			d, err := startup(b.path)
			if err != nil {
				return fmt.Errorf("%s: %w", b.label, err)
			}
			b.times = append(b.times, d)
		}
	}

	fmt.Printf("%s, %d start-ups each (exec to handshake line)\n\n", pkg, n)
	fmt.Printf("%-22s %12s %14s %12s\n", "binary", "size (MiB)", "median (ms)", "min (ms)")
	for _, b := range bins {
		fmt.Printf("%-22s %12.1f %14.1f %12.1f\n", b.label, mib(b.size), ms(median(b.times)), ms(slices.Min(b.times)))
	}
	fmt.Printf("%-22s %12.2f %14.2f %12.2f\n", "ratio (after/before)", float64(after.size)/float64(before.size),
		ms(median(after.times))/ms(median(before.times)), ms(slices.Min(after.times))/ms(slices.Min(before.times)))
	return nil
}

// startup starts the plugin as the agent does and times the handshake line.
func startup(path string) (time.Duration, error) {
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), cookie)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	d := time.Since(start)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil {
		return 0, fmt.Errorf("no handshake line: %w", err)
	}
	if !strings.Contains(line, "|grpc") {
		return 0, fmt.Errorf("unexpected handshake line %q", line)
	}
	return d, nil
}

func output(dir string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("%s %s failed: %w", name, strings.Join(args, " "), err)
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(b int64) float64 { return float64(b) / (1 << 20) }
