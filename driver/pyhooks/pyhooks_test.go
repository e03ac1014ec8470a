package pyhooks_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/driver/pyhooks"
)

// fakeHorovod is the shape of Horovod 0.28's port search: find_port in
// horovod.runner.util.network tries random ports in 1024-65535, and the
// modules whose services bind import it by name.
var fakeHorovod = map[string]string{
	"horovod/__init__.py":                    "",
	"horovod/runner/__init__.py":             "",
	"horovod/runner/util/__init__.py":        "",
	"horovod/runner/common/__init__.py":      "",
	"horovod/runner/common/util/__init__.py": "",
	"horovod/runner/http/__init__.py":        "",
	"horovod/runner/util/network.py": `import random
def find_port(server_factory):
    min_port = 1024
    max_port = 65536
    num_ports = max_port - min_port
    start_port = random.randrange(0, num_ports)
    for port_offset in range(num_ports):
        try:
            port = min_port + (start_port + port_offset) % num_ports
            return server_factory(('', port)), port
        except Exception:
            pass
    raise Exception('Unable to find a port to bind to.')
`,
	"horovod/runner/common/util/network.py": "from horovod.runner.util.network import find_port\n",
	"horovod/runner/http/http_server.py":    "from horovod.runner.util.network import find_port\n",
}

// probe binds through each module's find_port 20 times, with Horovod's
// random choice forced to start at the port after FORCE (a port the test
// holds is skipped, as Horovod skips ports in use), and prints the ports.
// GUARD says when the guard runs: "before" the imports, "after", or "no".
const probe = `import os, random, socket, socketserver, sys
force = int(os.environ["FORCE"])
random.randrange = lambda a, b=None: force - 1024
if os.environ["GUARD"] == "before":
    exec(os.environ["HOOK"])
import horovod.runner.util.network as a
import horovod.runner.common.util.network as b
import horovod.runner.http.http_server as c
if os.environ["GUARD"] == "after":
    exec(os.environ["HOOK"])
ports = []
for m in (a, b, c):
    for _ in range(20):
        server, port = m.find_port(lambda addr: socketserver.TCPServer(addr, socketserver.BaseRequestHandler))
        assert server.server_address[1] == port
        ports.append(port)
        server.server_close()
print(" ".join(map(str, ports)))
`

// pythonWith returns python3 (the test is skipped without one) and a
// directory holding files (path -> content), for PYTHONPATH.
func pythonWith(t *testing.T, files map[string]string) (python, dir string) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	dir = t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, name)
		must.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		must.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	}
	return python, dir
}

func runProbe(t *testing.T, guard, avoid string, force int) []string {
	t.Helper()
	python, dir := pythonWith(t, fakeHorovod)
	cmd := exec.Command(python, "-c", probe)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "GUARD="+guard, "HOOK="+pyhooks.Ports,
		pyhooks.AvoidPortsEnv+"="+avoid, "FORCE="+strconv.Itoa(force))
	out, err := cmd.CombinedOutput()
	must.NoError(t, err, must.Sprintf("probe: %s", out))
	return strings.Fields(string(out))
}

func inRange(port string, low, high int) bool {
	p, err := strconv.Atoi(port)
	return err == nil && p >= low && p <= high
}

// TestPorts_ForcedCollisionCannotHappen forces Horovod's random search
// onto a port inside Nomad's dynamic range (20000-32000): unguarded, every
// service binds there, as when a worker agent then found its Nomad port
// taken; guarded, none does, whether the guard runs before Horovod's
// modules are imported (the launcher's bootstrap) or after (a standby that
// preloaded them).
func TestPorts_ForcedCollisionCannotHappen(t *testing.T) {
	const low, high = 20000, 32000
	force := 25000
	for _, port := range runProbe(t, "no", "20000-32000", force) {
		must.True(t, inRange(port, low, high), must.Sprintf("unguarded port %s: the probe does not force the collision", port))
	}
	for _, guard := range []string{"before", "after"} {
		t.Run(guard, func(t *testing.T) {
			ports := runProbe(t, guard, "20000-32000", force)
			must.Len(t, 60, ports)
			for _, port := range ports {
				must.False(t, inRange(port, low, high), must.Sprintf("guarded port %s is in the avoided range", port))
			}
		})
	}
}

// TestPorts_KernelRangeAvoided: where the avoided range holds the kernel's
// whole ephemeral range (32768-60999 by default, and whatever this machine
// sets), the guard still finds ports, outside it.
func TestPorts_KernelRangeAvoided(t *testing.T) {
	for _, port := range runProbe(t, "before", "1024-61000", 30000) {
		must.False(t, inRange(port, 1024, 61000), must.Sprintf("port %s is in the avoided range", port))
	}
}

// TestPorts_NoRangeNoChange: without the variable (or with a malformed
// one) the guard keeps no range out; ports still come from the kernel.
func TestPorts_NoRangeNoChange(t *testing.T) {
	for _, avoid := range []string{"", "32000-20000", "x-y", "0-70000"} {
		must.Len(t, 60, runProbe(t, "before", avoid, 25000), must.Sprint(avoid))
	}
}
