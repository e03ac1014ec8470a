package importrules

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// nomadFree are the packages (go list patterns, relative to the module)
// that must not link github.com/hashicorp/nomad, the source-available
// module, in their builds or their tests: every package of the module
// (the plugins speak Nomad's plugin protocol through internal/nomadplugin;
// the Nomad agent the lab and the e2e tier run is an external tool, built
// in tools/nomad). Only Nomad's api module (its own module, MPL-2.0) is
// allowed.
var nomadFree = []string{"..."}

// nomadFreeTags are the build tag sets the packages are listed with: the
// default build, and the e2e tier's tests.
var nomadFreeTags = []string{"", "e2e"}

const nomadModule = "github.com/hashicorp/nomad"

// nomadPackage reports whether pkg belongs to the source-available module
// (and not to its api module).
func nomadPackage(pkg string) bool {
	if pkg != nomadModule && !strings.HasPrefix(pkg, nomadModule+"/") {
		return false
	}
	return pkg != nomadModule+"/api" && !strings.HasPrefix(pkg, nomadModule+"/api/")
}

// nomadImports reads `go list -deps -test` lines "pkg|import import..."
// and returns where the module's packages reach the source-available
// module: "pkg imports nomadpkg", one per import, and how many of its
// packages are linked in all.
func nomadImports(lines []string) (entries []string, linked int) {
	for _, l := range lines {
		pkg, imports, _ := strings.Cut(l, "|")
		if nomadPackage(pkg) {
			linked++
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if nomadPackage(imp) {
				entries = append(entries, pkg+" imports "+imp)
			}
		}
	}
	slices.Sort(entries)
	return slices.Compact(entries), linked
}

// No binary of the module and none of its tests (the e2e tier's
// included) links anything of the source-available Nomad module (issue
// 32): `go list -deps -test` of every package names none of its packages.
func TestNomadFree(t *testing.T) {
	for _, tags := range nomadFreeTags {
		t.Run("tags="+tags, func(t *testing.T) {
			args := []string{"list", "-deps", "-test", "-tags", tags, "-f", `{{.ImportPath}}|{{join .Imports " "}}`}
			for _, p := range nomadFree {
				args = append(args, module+p)
			}
			cmd := exec.Command("go", args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			must.NoError(t, err, must.Sprintf("go list: %s", stderr.String()))
			var lines []string
			sc := bufio.NewScanner(bytes.NewReader(out))
			sc.Buffer(nil, 1<<24)
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			must.NoError(t, sc.Err())
			must.SliceNotEmpty(t, lines)
			entries, linked := nomadImports(lines)
			for _, e := range entries {
				t.Errorf("links the source-available Nomad module: %s", e)
			}
			must.Zero(t, linked, must.Sprintf("%d packages of %s are linked", linked, nomadModule))
		})
	}
}

func TestNomadImports(t *testing.T) {
	const gpu = "github.com/schedulearn/schedulearn/plugins/device/gpu"
	lines := []string{
		gpu + "|fmt github.com/hashicorp/nomad/api github.com/hashicorp/nomad/plugins/base",
		gpu + " [" + gpu + ".test]|github.com/hashicorp/nomad/helper/testlog github.com/hashicorp/nomad/plugins/base",
		"github.com/hashicorp/nomad/plugins/base|github.com/hashicorp/nomad/plugins/shared/hclspec",
		"github.com/hashicorp/nomad/plugins/shared/hclspec|",
		"github.com/hashicorp/nomad/helper/testlog|testing",
		"github.com/hashicorp/nomad/api|github.com/hashicorp/nomad/api/contexts",
		"github.com/hashicorp/nomad/api/contexts|",
		"github.com/hashicorp/nomad-driver-exec2/plugin|",
	}
	entries, linked := nomadImports(lines)
	must.Eq(t, []string{
		gpu + " [" + gpu + ".test] imports github.com/hashicorp/nomad/helper/testlog",
		gpu + " [" + gpu + ".test] imports github.com/hashicorp/nomad/plugins/base",
		gpu + " imports github.com/hashicorp/nomad/plugins/base",
	}, entries)
	must.Eq(t, 3, linked)
}
