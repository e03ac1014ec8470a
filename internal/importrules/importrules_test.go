package importrules

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

const module = "github.com/schedulearn/schedulearn/"

// rule forbids the packages that from selects to depend, directly or not,
// on any package that forbidden selects, except those allowed selects.
type rule struct {
	name      string
	from      func(pkg string) bool
	forbidden func(pkg string) bool
	allowed   func(pkg string) bool
}

// under selects a package and everything below it (paths relative to the
// module).
func under(prefixes ...string) func(string) bool {
	return func(pkg string) bool {
		for _, p := range prefixes {
			if pkg == p || strings.HasPrefix(pkg, p+"/") {
				return true
			}
		}
		return false
	}
}

// outerRing is the planner's wiring and HTTP side, which may import the
// core: the API with its Go client and fake backend, the daemon that wires
// everything (as Nomad's command/agent), the Prometheus collector that
// reads the API's view, and the dashboard's assets.
var outerRing = under("planner/api", "planner/agent", "planner/metrics", "planner/ui")

// core is every other package under planner/: the rounds (planner), the
// records and errors (planner/structs), the store, the estimates
// (planner/assess), the cluster view, the jobspec and config parsers, the
// Nomad job builder (planner/nomadjob), the event broker, and whatever is
// added there later, which is core unless it is put in the outer ring.
func core(pkg string) bool { return under("planner")(pkg) && !outerRing(pkg) }

var rules = []rule{
	{name: "the planner's core imports neither the API nor the agent",
		from: core, forbidden: under("planner/api", "planner/agent")},
	{name: "the planner's core imports nothing of the driver",
		from: core, forbidden: under("driver")},
	{name: "the driver imports nothing of the planner",
		from: under("driver", "cmd/nomad-driver-horovod"), forbidden: under("planner")},
	{name: "the device plugin imports nothing of the planner or the driver",
		from: under("plugins/device", "cmd/schedulearn-gpu"), forbidden: under("planner", "driver")},
	{name: "a policy plugin imports nothing of the planner",
		from: under("plugins/policy/examples"), forbidden: under("planner")},
	{name: "what the planner and the driver share imports nothing of either",
		from: under("internal/drain", "internal/jobsecret"), forbidden: under("planner", "driver")},
}

// graph is the module's packages (paths relative to the module), each
// with its direct imports and all its dependencies within the module.
type graph map[string]struct{ imports, deps []string }

// violations lists, for each rule, the forbidden dependencies with the
// chain of imports that leads to each; and the rules that select no
// package (a rename would make them vacuous).
func violations(g graph, rules []rule) []string {
	var out []string
	for _, r := range rules {
		matched := false
		for _, pkg := range slices.Sorted(mapKeys(g)) {
			if !r.from(pkg) {
				continue
			}
			matched = true
			for _, dep := range g[pkg].deps {
				if r.forbidden(dep) && (r.allowed == nil || !r.allowed(dep)) {
					out = append(out, fmt.Sprintf("%s: %s imports %s (%s)", r.name, pkg, dep, strings.Join(chain(g, pkg, dep), " -> ")))
				}
			}
		}
		if !matched {
			out = append(out, fmt.Sprintf("%s: no package is selected", r.name))
		}
	}
	return out
}

// chain is the shortest import path from pkg to dep.
func chain(g graph, pkg, dep string) []string {
	prev := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == dep {
			var path []string
			for ; p != ""; p = prev[p] {
				path = append(path, p)
			}
			slices.Reverse(path)
			return path
		}
		for _, next := range g[p].imports {
			if _, seen := prev[next]; !seen {
				prev[next] = p
				queue = append(queue, next)
			}
		}
	}
	return []string{pkg, "...", dep}
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

// load lists the module's packages with one `go list` (what the builds
// see, without tests: the rules are about what ships).
func load(t *testing.T) graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}", module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	must.NoError(t, err, must.Sprintf("go list: %s", stderr.String()))
	own := func(list string) []string {
		var pkgs []string
		for _, p := range strings.Fields(list) {
			if rel, ok := strings.CutPrefix(p, module); ok {
				pkgs = append(pkgs, rel)
			}
		}
		return pkgs
	}
	g := graph{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), "|", 3)
		must.Len(t, 3, parts, must.Sprintf("go list line %q", sc.Text()))
		rel, ok := strings.CutPrefix(parts[0], module)
		if !ok {
			continue
		}
		g[rel] = struct{ imports, deps []string }{own(parts[1]), own(parts[2])}
	}
	must.NoError(t, sc.Err())
	return g
}

// The module's layers point one way (issue 15).
func TestImportRules(t *testing.T) {
	g := load(t)
	must.MapContainsKeys(t, g, []string{"planner", "planner/api", "driver", "plugins/device/gpu", "internal/drain"})
	for _, v := range violations(g, rules) {
		t.Error(v)
	}
}

// Each rule catches what it forbids, directly or through another package,
// and says how; an allowed package passes; a rule that selects nothing
// is reported.
func TestViolations(t *testing.T) {
	edges := func(imports []string, deps ...string) struct{ imports, deps []string } {
		return struct{ imports, deps []string }{imports, append(slices.Clone(imports), deps...)}
	}
	for _, c := range []struct {
		name string
		g    graph
		want []string
	}{
		{"core imports the API through another core package",
			graph{"planner/nomadjob": edges([]string{"planner"}, "planner/api"), "planner": edges([]string{"planner/api"}), "planner/api": edges(nil)},
			[]string{
				"the planner's core imports neither the API nor the agent: planner imports planner/api (planner -> planner/api)",
				"the planner's core imports neither the API nor the agent: planner/nomadjob imports planner/api (planner/nomadjob -> planner -> planner/api)",
			}},
		{"the outer ring may import the core",
			graph{"planner/agent": edges([]string{"planner", "planner/api"}), "planner": edges(nil), "planner/api": edges([]string{"planner/structs"}), "planner/structs": edges(nil)},
			nil},
		{"core imports the driver",
			graph{"planner/nomadjob": edges([]string{"driver/rescale", "driver/jobstate"}), "driver/rescale": edges(nil), "driver/jobstate": edges(nil)},
			[]string{
				"the planner's core imports nothing of the driver: planner/nomadjob imports driver/rescale (planner/nomadjob -> driver/rescale)",
				"the planner's core imports nothing of the driver: planner/nomadjob imports driver/jobstate (planner/nomadjob -> driver/jobstate)",
			}},
		{"the driver imports the planner",
			graph{"cmd/nomad-driver-horovod": edges([]string{"driver"}, "planner/structs"), "driver": edges([]string{"planner/structs"}), "planner/structs": edges(nil)},
			[]string{
				"the driver imports nothing of the planner: cmd/nomad-driver-horovod imports planner/structs (cmd/nomad-driver-horovod -> driver -> planner/structs)",
				"the driver imports nothing of the planner: driver imports planner/structs (driver -> planner/structs)",
			}},
		{"the device plugin imports the driver",
			graph{"plugins/device/gpu": edges([]string{"driver/jobstate"}), "driver/jobstate": edges(nil)},
			[]string{"the device plugin imports nothing of the planner or the driver: plugins/device/gpu imports driver/jobstate (plugins/device/gpu -> driver/jobstate)"}},
		{"a policy plugin imports the planner",
			graph{"plugins/policy/examples/x": edges([]string{"plugins/policy", "planner/structs"}), "plugins/policy": edges(nil), "planner/structs": edges(nil)},
			[]string{"a policy plugin imports nothing of the planner: plugins/policy/examples/x imports planner/structs (plugins/policy/examples/x -> planner/structs)"}},
		{"the drain protocol imports the driver",
			graph{"internal/drain": edges([]string{"driver/jobstate"}), "driver/jobstate": edges(nil)},
			[]string{"what the planner and the driver share imports nothing of either: internal/drain imports driver/jobstate (internal/drain -> driver/jobstate)"}},
		{"the job's secrets import the planner",
			graph{"internal/jobsecret": edges([]string{"planner/structs"}), "planner/structs": edges(nil)},
			[]string{"what the planner and the driver share imports nothing of either: internal/jobsecret imports planner/structs (internal/jobsecret -> planner/structs)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, v := range violations(c.g, rules) {
				if !strings.HasSuffix(v, "no package is selected") {
					got = append(got, v)
				}
			}
			must.Eq(t, c.want, got)
		})
	}
	must.SliceContains(t, violations(graph{}, rules[:1]), "the planner's core imports neither the API nor the agent: no package is selected")
}
