package jobspec

import (
	"reflect"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func fullSpec() *Spec {
	tier1 := 0.9
	return &Spec{
		Name: "resnet50", Command: "python3", Args: []string{"train.py"}, Launcher: LauncherHorovod,
		Env: map[string]string{"A": "1"}, Labels: map[string]string{"team": "vision"},
		GPUs:         GPUs{Min: 1, Max: 4, PerWorker: 1},
		Target:       &Target{Metric: "accuracy", Goal: 0.93, Tier1: &tier1, Within: time.Hour},
		Affinity:     Selector{Jobs: []string{"a"}, Labels: map[string]string{"k": "v"}},
		AntiAffinity: Selector{Jobs: []string{"b"}, Labels: map[string]string{"k": "w"}},
		Data:         []Data{{Name: "imagenet", Prefer: map[string]string{"meta.datasets": "imagenet"}}},
		Artifacts:    []Artifact{{Source: "s", Destination: "d"}},
		Batch:        &Batch{Size: 128, Max: 4096, MaxPerGPU: 256},
	}
}

// A clone shares nothing a caller could change with the original: the
// in-memory store hands out clones of the specs it keeps.
func TestSpec_CloneIsDeep(t *testing.T) {
	orig := fullSpec()
	c := orig.Clone()
	must.Eq(t, *orig, c)

	c.Args[0] = "evil.py"
	c.Env["A"] = "2"
	c.Labels["team"] = "nlp"
	*c.Target.Tier1 = 0.1
	c.Target.Goal = 0.5
	c.Affinity.Jobs[0], c.Affinity.Labels["k"] = "x", "x"
	c.AntiAffinity.Jobs[0], c.AntiAffinity.Labels["k"] = "x", "x"
	c.Data[0].Prefer["meta.datasets"] = "coco"
	c.Artifacts[0].Source = "x"
	c.Batch.Size = 1
	must.Eq(t, *fullSpec(), *orig)

	var zero Spec
	must.Eq(t, zero, zero.Clone())
}

// Clone must learn of every field that holds a reference: this lists them,
// so a new one fails here until Clone copies it (and the list is updated).
func TestSpec_CloneKnowsEveryReference(t *testing.T) {
	var refs []string
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			switch f.Type.Kind() {
			case reflect.Map, reflect.Slice, reflect.Pointer, reflect.Interface, reflect.Chan, reflect.Func:
				refs = append(refs, prefix+f.Name)
			case reflect.Struct:
				if f.Type.PkgPath() == typ.PkgPath() {
					walk(prefix+f.Name+".", f.Type)
				}
			}
		}
	}
	walk("", reflect.TypeFor[Spec]())
	must.Eq(t, []string{"Args", "Env", "Labels", "Target", "Affinity.Jobs", "Affinity.Labels",
		"AntiAffinity.Jobs", "AntiAffinity.Labels", "Data", "Artifacts", "Batch", "Secrets"}, refs)
}
