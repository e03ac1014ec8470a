package importrules

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/shoenig/test/must"
)

const module = "github.com/schedulearn/schedulearn/"

// A component is a set of the module's packages that may import each
// other and the components named in may, and nothing else of the module.
// Its packages are paths relative to the module: "x" is that package,
// "x/..." it and every package below it; a package belongs to the
// component with its longest match, so "planner/api/apitest" can be a
// test kit while "planner/api/..." is the HTTP layer. A package that no
// component names fails the test: a new package is placed on purpose.
type component struct {
	name     string
	packages []string
	may      []string
	why      string // one line for docs/architecture.md
}

// components is the architecture, bottom up: each imports only what is
// above it in the list and says so.
var components = []component{
	{name: "helpers", packages: []string{"internal/hcldiag", "internal/hclsafe", "internal/termtext"},
		why: "HCL diagnostics with file:line:col, bounded HCL decoding, terminal-safe text"},
	{name: "contract", packages: []string{"internal/drain", "internal/jobsecret"},
		why: "what the planner and the driver both speak: the drain protocol (in-place resize) and the job's secret variable"},
	{name: "plugin-sdk", packages: []string{"internal/nomadplugin/..."},
		why: "our own SDK of Nomad's plugin protocol (go-plugin, gRPC): the driver's and the device plugin's lower layer"},
	{name: "policy-api", packages: []string{"plugins/policy"},
		why: "the policy contract (snapshot, plan, validation) every policy and the planner share; no go-plugin, no gRPC"},
	{name: "policy-wire", packages: []string{"plugins/policy/plugin", "plugins/policy/internal/wire"}, may: []string{"policy-api"},
		why: "the policy plugins' wire (go-plugin over gRPC): plugin.Serve, a plugin's main"},
	{name: "policy-kits", packages: []string{"plugins/policy/place", "plugins/policy/admission"}, may: []string{"policy-api"},
		why: "the placement kit and the admission estimates that policies build on"},
	{name: "policy-builtins", packages: []string{"plugins/policy/builtin"}, may: []string{"policy-api", "policy-kits"},
		why: "FIFO, Elastic FIFO, Tiresias, goodput, deadline/QoE and the others: policies, blind to the planner"},
	{name: "policy-plugins", packages: []string{"plugins/policy/examples/..."}, may: []string{"policy-api", "policy-kits", "policy-wire"},
		why: "external policy plugins: what a team writes, against the policy API only"},
	{name: "policy-host", packages: []string{"plugins/policy/host"}, may: []string{"policy-api", "policy-builtins", "policy-wire"},
		why: "runs policies: builtins in-process, plugin executables through go-plugin"},
	{name: "records", packages: []string{"planner/structs", "planner/jobspec"}, may: []string{"helpers"},
		why: "the job's records, errors and jobspec: what every planner layer passes around"},
	// The core holds the store's contract and its in-memory store, with
	// the helpers every store shares (planner/store/internal/recs); the
	// bbolt and Consul stores are adapters (issue 31).
	{name: "core", packages: []string{"planner", "planner/assess", "planner/quota", "planner/store", "planner/store/internal/recs"},
		may: []string{"records", "policy-api", "policy-kits"},
		why: "deciding: the rounds, estimates, queues and quotas, the store's contract and its in-memory store"},
	{name: "adapters", packages: []string{"planner/cluster", "planner/nomadjob", "planner/delivery", "planner/depwatch", "planner/events", "planner/config",
		"planner/store/boltstore", "planner/store/consulstore"},
		may: []string{"core", "records", "contract", "policy-api", "helpers"},
		why: "the core's ties to the world: Nomad's nodes and jobs, model delivery, dependency health, the event broker, the agent's configuration, the bbolt and Consul stores (with Consul's leader election)"},
	{name: "http", packages: []string{"planner/api/...", "planner/ui", "planner/metrics"},
		may: []string{"core", "adapters", "records", "policy-api", "helpers"},
		why: "the planner's HTTP API and its Go client, the dashboard's assets, the Prometheus collector"},
	{name: "daemon", packages: []string{"planner/agent"}, may: []string{"core", "adapters", "http", "policy-host", "records", "helpers"},
		why: "the planner daemon: wires the core, its adapters, the policy host and the HTTP layer (as Nomad's command/agent)"},
	{name: "simulator", packages: []string{"sim/..."}, may: []string{"core", "records", "policy-api", "policy-kits", "policy-builtins", "policy-host"},
		why: "the trace-driven simulator: the real core and policies on simulated time, no adapters"},
	{name: "lab", packages: []string{"internal/lab"},
		why: "starts the local lab's Consul, Nomad and Terraform as external tools"},
	{name: "cli", packages: []string{"command", "cmd/schedulearn"},
		may: []string{"daemon", "http", "adapters", "core", "records", "simulator", "lab", "policy-api", "policy-builtins", "policy-host", "helpers"},
		why: "the schedulearn command: the agent, the job commands, the lab, the simulator"},
	// The node's warm interpreter is a leaf the driver and the worker
	// agent both use; it imports neither (issue 31).
	{name: "fork-server", packages: []string{"driver/forkserver"},
		why: "the node's warm interpreter (Python) the driver starts, and how a worker agent asks it for a standby: forks processes that are their caller's"},
	{name: "driver", packages: []string{"driver/...", "cmd/nomad-driver-horovod"}, may: []string{"contract", "plugin-sdk", "fork-server"},
		why: "the horovod task driver: stands alone, nothing of the planner"},
	{name: "device-plugin", packages: []string{"plugins/device/...", "cmd/schedulearn-gpu"}, may: []string{"plugin-sdk"},
		why: "the GPU device plugin (NVML): stands alone, nothing of the planner or the driver"},
	{name: "test-kits", packages: []string{"internal/testlab", "internal/fakeagent", "internal/testcgroup", "internal/leakcheck",
		"internal/importrules", "internal/nomadplugin/plugintest", "planner/api/apitest", "planner/store/storetest", "plugins/policy/internal/policytest", "e2e", "tools/pluginbench"},
		may: []string{"*"},
		why: "what tests and benchmarks build on: no component above imports one"},
}

// componentOf is the component that package pkg belongs to (nil: none),
// and the other components with a match as long (a table error).
func componentOf(cs []component, pkg string) (*component, []string) {
	var best *component
	var ties []string
	bestLen := -1
	for i := range cs {
		for _, p := range cs[i].packages {
			n := -1
			if base, ok := strings.CutSuffix(p, "/..."); ok {
				if pkg == base || strings.HasPrefix(pkg, base+"/") {
					n = len(base)
				}
			} else if pkg == p {
				n = len(p) + 1 // an exact name beats a tree of the same path
			}
			switch {
			case n > bestLen:
				best, bestLen, ties = &cs[i], n, nil
			case n == bestLen && n >= 0 && best != &cs[i]:
				ties = append(ties, cs[i].name)
			}
		}
	}
	return best, ties
}

// graph is the module's packages (paths relative to the module), each
// with its direct imports within the module.
type graph map[string][]string

// violations lists every package that no component names (or two do), and
// every direct import from a component to one it may not import, with
// the chain of imports from the package to it; and every component that
// names no package of g or may import a component not in the table.
func violations(g graph, cs []component) []string {
	var out []string
	names := map[string]bool{}
	for _, c := range cs {
		names[c.name] = true
	}
	for _, c := range cs {
		for _, m := range c.may {
			if m != "*" && !names[m] {
				out = append(out, fmt.Sprintf("%s: may import %q, which is no component", c.name, m))
			}
		}
	}
	used := map[string]bool{}
	for _, pkg := range slices.Sorted(mapKeys(g)) {
		from, ties := componentOf(cs, pkg)
		if from == nil {
			out = append(out, fmt.Sprintf("%s: in no component (put it in one: internal/importrules)", pkg))
			continue
		}
		if len(ties) > 0 {
			out = append(out, fmt.Sprintf("%s: in %s and in %s", pkg, from.name, strings.Join(ties, ", ")))
		}
		used[from.name] = true
		for _, dep := range g[pkg] {
			to, _ := componentOf(cs, dep)
			if to == nil || to == from || slices.Contains(from.may, to.name) || slices.Contains(from.may, "*") {
				continue
			}
			out = append(out, fmt.Sprintf("%s may not import %s: %s imports %s", from.name, to.name, pkg, dep))
		}
	}
	for _, c := range cs {
		if !used[c.name] {
			out = append(out, fmt.Sprintf("%s: names no package (a rename would make its rules vacuous)", c.name))
		}
	}
	return out
}

func mapKeys(g graph) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range g {
			if !yield(k) {
				return
			}
		}
	}
}

// listModule is one `go list` of the module's packages and their imports.
var listModule = sync.OnceValues(func() ([]byte, error) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}", module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	return out, nil
})

// load lists the module's packages with one `go list` (what the builds
// see, without tests: the rules are about what ships).
// The three tests that read it share one listing (the graph is only read).
func load(t *testing.T) graph {
	t.Helper()
	out, err := listModule()
	must.NoError(t, err)
	g := graph{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), "|", 2)
		must.Len(t, 2, parts, must.Sprintf("go list line %q", sc.Text()))
		rel, ok := strings.CutPrefix(parts[0], module)
		if !ok {
			continue
		}
		var imports []string
		for _, p := range strings.Fields(parts[1]) {
			if r, ok := strings.CutPrefix(p, module); ok {
				imports = append(imports, r)
			}
		}
		g[rel] = imports
	}
	must.NoError(t, sc.Err())
	return g
}

// The module's layers point one way (issues 15 and 31): every package is
// in one component, and imports only its own and those its component may.
func TestImportRules(t *testing.T) {
	g := load(t)
	must.MapContainsKeys(t, g, []string{"planner", "planner/api", "driver", "plugins/device/gpu", "internal/drain"})
	for _, v := range violations(g, components) {
		t.Error(v)
	}
}

// Every rule fails when broken: for each component and each component it
// may not import, an import of one of the latter's packages added to one
// of its own is reported, and nothing else is. The four imports the
// architecture review named are among them.
func TestImportRules_EachRuleFails(t *testing.T) {
	g := load(t)
	must.SliceEmpty(t, violations(g, components))
	first := map[string]string{} // component -> one of its packages
	for _, pkg := range slices.Sorted(mapKeys(g)) {
		if c, _ := componentOf(components, pkg); c != nil && first[c.name] == "" {
			first[c.name] = pkg
		}
	}
	broken := 0
	for _, from := range components {
		for _, to := range components {
			if to.name == from.name || slices.Contains(from.may, to.name) || slices.Contains(from.may, "*") {
				continue
			}
			pkg, dep := first[from.name], first[to.name]
			got := violations(withImport(g, pkg, dep), components)
			must.Eq(t, []string{fmt.Sprintf("%s may not import %s: %s imports %s", from.name, to.name, pkg, dep)}, got)
			broken++
		}
	}
	must.Greater(t, 100, broken, must.Sprint("rules tried"))
	for _, c := range []struct{ pkg, dep, want string }{
		{"planner", "planner/delivery", "core may not import adapters: planner imports planner/delivery"},
		{"planner", "planner/ui", "core may not import http: planner imports planner/ui"},
		{"plugins/policy/builtin", "planner/structs", "policy-builtins may not import records: plugins/policy/builtin imports planner/structs"},
		{"sim", "planner/agent", "simulator may not import daemon: sim imports planner/agent"},
		{"planner/nomadjob", "driver/taskfile", "adapters may not import driver: planner/nomadjob imports driver/taskfile"},
		{"driver/horovod", "planner/structs", "driver may not import records: driver/horovod imports planner/structs"},
		{"plugins/device/gpu", "driver/supervisor", "device-plugin may not import driver: plugins/device/gpu imports driver/supervisor"},
		{"internal/drain", "driver/taskfile", "contract may not import driver: internal/drain imports driver/taskfile"},
		{"driver/forkserver", "driver/workeragent", "fork-server may not import driver: driver/forkserver imports driver/workeragent"},
		{"planner/agent", "internal/testlab", "daemon may not import test-kits: planner/agent imports internal/testlab"},
	} {
		must.Eq(t, []string{c.want}, violations(withImport(g, c.pkg, c.dep), components))
	}
}

// The table's own errors: a package in no component, a component that
// names nothing or may import an unknown one.
func TestImportRules_TableErrors(t *testing.T) {
	g := load(t)
	withNew := withImport(g, "planner/newthing", "planner")
	must.Eq(t, []string{"planner/newthing: in no component (put it in one: internal/importrules)"}, violations(withNew, components))
	cs := append(slices.Clone(components), component{name: "ghost", packages: []string{"nowhere"}, may: []string{"nobody"}})
	must.Eq(t, []string{`ghost: may import "nobody", which is no component`, "ghost: names no package (a rename would make its rules vacuous)"}, violations(g, cs))
	c, _ := componentOf(components, "planner/api/apitest")
	must.Eq(t, "test-kits", c.name, must.Sprint("the longest match wins"))
	c, _ = componentOf(components, "planner/api/client")
	must.Eq(t, "http", c.name)
}

// withImport is g with pkg importing dep too (pkg added where new).
func withImport(g graph, pkg, dep string) graph {
	out := make(graph, len(g)+1)
	for k, v := range g {
		out[k] = v
	}
	out[pkg] = append(slices.Clone(out[pkg]), dep)
	return out
}

// docs/architecture.md's table of components is the one above: a change
// of either without the other fails (UPDATE_ARCHITECTURE=1 rewrites the
// doc's table from this one).
func TestImportRules_Documented(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "architecture.md")
	doc, err := os.ReadFile(path)
	must.NoError(t, err)
	const begin, end = "<!-- components: begin (internal/importrules) -->\n", "<!-- components: end -->\n"
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	must.True(t, i >= 0 && j > i, must.Sprintf("%s has no %q ... %q section", path, begin, end))
	want := markdown(components)
	if os.Getenv("UPDATE_ARCHITECTURE") != "" {
		out := slices.Concat(doc[:i+len(begin)], []byte(want), doc[j:])
		must.NoError(t, os.WriteFile(path, out, 0o644))
		return
	}
	must.Eq(t, want, string(doc[i+len(begin):j]), must.Sprint("run UPDATE_ARCHITECTURE=1 go test ./internal/importrules/ -run Documented"))
}

// markdown is the table of components as docs/architecture.md shows it.
func markdown(cs []component) string {
	var b strings.Builder
	b.WriteString("| component | packages | may import | what it is |\n|---|---|---|---|\n")
	for _, c := range cs {
		pkgs := make([]string, len(c.packages))
		for i, p := range c.packages {
			pkgs[i] = "`" + p + "`"
		}
		may := strings.Join(c.may, ", ")
		switch {
		case slices.Contains(c.may, "*"):
			may = "anything"
		case may == "":
			may = "nothing of the module"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", c.name, strings.Join(pkgs, " "), may, c.why)
	}
	return b.String()
}

// The core decides; it starts no process, speaks no plugin wire and
// opens no database: the planner package and the rest of the core, and
// the policies' contract, kits and builtins, link no go-plugin, gRPC or
// os/exec (the policy host's go-plugin launcher is wired in by the agent,
// and the policy contract holds no wire), nor bbolt, Consul's client or
// Nomad's (the store's contract and its in-memory store are planner/store,
// the bbolt and Consul stores adapters of their own that the agent opens,
// issue 31).
func TestCoreLinks(t *testing.T) {
	forbidden := []string{"github.com/hashicorp/go-plugin", "google.golang.org/grpc", "os/exec",
		"go.etcd.io/bbolt", "github.com/hashicorp/consul/api", "github.com/hashicorp/nomad/api"}
	pkgs := []string{"planner", "planner/store", "planner/store/internal/recs", "planner/assess", "planner/quota",
		"planner/structs", "planner/jobspec", "plugins/policy", "plugins/policy/place", "plugins/policy/admission", "plugins/policy/builtin"}
	args := []string{"list", "-f", "{{.ImportPath}}|{{join .Deps \" \"}}"}
	for _, pkg := range pkgs {
		args = append(args, module+pkg)
	}
	out, err := exec.Command("go", args...).Output() // each package with all it links, in one call
	must.NoError(t, err)
	listed := 0
	for line := range strings.Lines(string(out)) {
		pkg, deps, _ := strings.Cut(strings.TrimSpace(line), "|")
		listed++
		for _, f := range forbidden {
			must.SliceNotContains(t, strings.Fields(deps), f, must.Sprintf("%s links %s", pkg, f))
		}
	}
	must.Eq(t, len(pkgs), listed)
}
