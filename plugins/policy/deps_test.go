package policy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// TestExample_LinksOnlyTheContract: a plugin author imports the contract
// alone. The example plugin and its binary link no package of the project
// but the contract, its serving package (plugin) and their internal
// packages, and nothing they link plans:
// no method named Plan, which every builtin and the placement kit's Board
// have (before the contract stood apart, it held them, and this failed).
func TestExample_LinksOnlyTheContract(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	const module = "github.com/schedulearn/schedulearn/"
	const contract = module + "plugins/policy"
	const example = contract + "/examples/largestfirst"
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}",
		example+"/...").Output()
	must.NoError(t, err, must.Sprintf("go list: %s", out))

	var linked []string
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		path, rest, _ := strings.Cut(strings.TrimSpace(line), "\t")
		dir, files, _ := strings.Cut(rest, "\t")
		if !strings.HasPrefix(path, module) || path == example || strings.HasPrefix(path, example+"/") {
			continue
		}
		linked = append(linked, path)
		if path != contract && path != contract+"/plugin" && !strings.HasPrefix(path, contract+"/internal/") {
			t.Errorf("the example links %s, which is not the contract", path)
		}
		for _, f := range strings.Fields(files) {
			for _, m := range planMethods(t, filepath.Join(dir, f)) {
				t.Errorf("the example links %s, which plans: %s (%s)", path, m, f)
			}
		}
	}
	must.SliceContains(t, linked, contract)
}

// planMethods returns the methods named Plan that file declares, as
// "Receiver.Plan".
func planMethods(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	must.NoError(t, err)
	var out []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || fn.Name.Name != "Plan" {
			continue
		}
		recv := fn.Recv.List[0].Type
		if star, ok := recv.(*ast.StarExpr); ok {
			recv = star.X
		}
		if id, ok := recv.(*ast.Ident); ok {
			out = append(out, id.Name+".Plan")
		} else {
			out = append(out, "Plan")
		}
	}
	return out
}
