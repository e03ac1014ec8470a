package api_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// The parts of an OpenAPI 3.0 document the tests read.
type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas         map[string]schema          `json:"schemas"`
		Responses       map[string]json.RawMessage `json:"responses"`
		Parameters      map[string]json.RawMessage `json:"parameters"`
		Headers         map[string]json.RawMessage `json:"headers"`
		SecuritySchemes map[string]json.RawMessage `json:"securitySchemes"`
	} `json:"components"`
}

type operation struct {
	OperationID string                     `json:"operationId"`
	Access      string                     `json:"x-schedulearn-access"`
	Security    []map[string][]string      `json:"security"`
	Responses   map[string]json.RawMessage `json:"responses"`
}

type schema struct {
	Type       string            `json:"type"`
	Properties map[string]schema `json:"properties"`
	Required   []string          `json:"required"`
}

func loadDoc(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	must.NoError(t, json.Unmarshal(api.OpenAPI, &doc))
	must.StrHasPrefix(t, "3.0.", doc.OpenAPI)
	return doc
}

// Every route the server serves is in the document, and the document
// describes no route the server does not serve.
func TestOpenAPI_MatchesRoutes(t *testing.T) {
	doc := loadDoc(t)
	srv := apitest.NewServer(t, apitest.NewBackend())

	served := map[string]string{}
	for _, rt := range srv.API.Routes() {
		access := "read"
		switch {
		case rt.Write:
			access = "write"
		case rt.Public:
			access = "public"
		}
		served[strings.ToLower(rt.Method)+" "+rt.Pattern] = access
	}
	documented := map[string]string{}
	for path, item := range doc.Paths {
		for method, rawOp := range item {
			if !slices.Contains([]string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}, method) {
				continue // parameters, summary, ...
			}
			var op operation
			must.NoError(t, json.Unmarshal(rawOp, &op))
			documented[method+" "+path] = op.Access
			must.Eq(t, op.Access != "public", len(op.Security) > 0, must.Sprintf("%s %s: only public routes need no token", method, path))
			must.NotEq(t, "", op.OperationID, must.Sprintf("%s %s has no operationId", method, path))
			must.MapNotEmpty(t, op.Responses, must.Sprintf("%s %s has no responses", method, path))
		}
	}
	must.Eq(t, slices.Sorted(maps.Keys(served)), slices.Sorted(maps.Keys(documented)))
	// And the document says which routes need which token.
	must.Eq(t, served, documented)
}

// Every $ref in the document points at something the document holds.
func TestOpenAPI_RefsResolve(t *testing.T) {
	var raw any
	must.NoError(t, json.Unmarshal(api.OpenAPI, &raw))
	doc := loadDoc(t)
	var walk func(v any)
	n := 0
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				n++
				name, ok := strings.CutPrefix(ref, "#/components/schemas/")
				if ok {
					_, found := doc.Components.Schemas[name]
					must.True(t, found, must.Sprintf("dangling $ref %s", ref))
					return
				}
				kind, name, _ := strings.Cut(strings.TrimPrefix(ref, "#/components/"), "/")
				held, ok := map[string]map[string]json.RawMessage{"responses": doc.Components.Responses,
					"parameters": doc.Components.Parameters, "headers": doc.Components.Headers}[kind]
				must.True(t, ok, must.Sprintf("unexpected $ref %s", ref))
				_, found := held[name]
				must.True(t, found, must.Sprintf("dangling $ref %s", ref))
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(raw)
	must.Positive(t, n)
}

// Each schema names exactly the JSON fields of the Go type it describes,
// so a field added to a record without documenting it fails here.
func TestOpenAPI_SchemasMatchTypes(t *testing.T) {
	doc := loadDoc(t)
	types := map[string]reflect.Type{
		"Error":            reflect.TypeFor[api.ErrorResponse](),
		"Diagnostic":       reflect.TypeFor[api.Diagnostic](),
		"SubmitRequest":    reflect.TypeFor[api.SubmitRequest](),
		"SetPolicyRequest": reflect.TypeFor[api.SetPolicyRequest](),
		"SetQueuesRequest": reflect.TypeFor[api.SetQueuesRequest](),
		"JobStub":          reflect.TypeFor[api.JobStub](),
		"Wait":             reflect.TypeFor[structs.Wait](),
		"PolicyInfo":       reflect.TypeFor[api.PolicyInfo](),
		"NodeInfo":         reflect.TypeFor[api.NodeInfo](),
		"QueueStatus":      reflect.TypeFor[structs.QueueStatus](),
		"QueueGPUs":        reflect.TypeFor[structs.QueueGPUs](),
		"QueueWindow":      reflect.TypeFor[structs.QueueWindow](),
		"Status":           reflect.TypeFor[api.Status](),
		"Job":              reflect.TypeFor[structs.Job](),
		"GPUChange":        reflect.TypeFor[structs.GPUChange](),
		"ModelRun":         reflect.TypeFor[structs.ModelRun](),
		"ModelRate":        reflect.TypeFor[structs.ModelRate](),
		"Move":             reflect.TypeFor[structs.Move](),
		"Event":            reflect.TypeFor[structs.Event](),
		"ProgressReport":   reflect.TypeFor[api.ProgressReport](),
		"Metric":           reflect.TypeFor[structs.Metric](),
		"Progress":         reflect.TypeFor[structs.Progress](),
		"Delivery":         reflect.TypeFor[structs.Delivery](),
		"Preemption":       reflect.TypeFor[structs.Preemption](),
		"Resume":           reflect.TypeFor[structs.Resume](),
		"Idempotency":      reflect.TypeFor[structs.Idempotency](),
		"Outlook":          reflect.TypeFor[structs.Outlook](),
		"GPUAssessment":    reflect.TypeFor[structs.GPUAssessment](),
		"TargetOutlook":    reflect.TypeFor[structs.TargetOutlook](),
		"Admission":        reflect.TypeFor[structs.Admission](),
		"PolicyState":      reflect.TypeFor[structs.PolicyState](),
		"Spec":             reflect.TypeFor[jobspec.Spec](),
		"GPUs":             reflect.TypeFor[jobspec.GPUs](),
		"Target":           reflect.TypeFor[jobspec.Target](),
		"Selector":         reflect.TypeFor[jobspec.Selector](),
		"Data":             reflect.TypeFor[jobspec.Data](),
		"Artifact":         reflect.TypeFor[jobspec.Artifact](),
		"Worker":           reflect.TypeFor[jobspec.Worker](),
		"Batch":            reflect.TypeFor[jobspec.Batch](),
		"BatchAdvice":      reflect.TypeFor[structs.BatchAdvice](),
		"Range":            reflect.TypeFor[hcl.Range](),
		"Pos":              reflect.TypeFor[hcl.Pos](),
		"QueueEntry":       reflect.TypeFor[api.QueueEntry](),
		"Utilization":      reflect.TypeFor[api.Utilization](),
		"UtilizationPoint": reflect.TypeFor[api.UtilizationPoint](),
		"StreamEvent":      reflect.TypeFor[structs.StreamEvent](),
		"Health":           reflect.TypeFor[structs.Health](),
		"LostEvents":       reflect.TypeFor[api.LostEvents](),
	}
	for name, s := range doc.Components.Schemas {
		if s.Type != "object" {
			continue // enums such as JobState
		}
		typ, ok := types[name]
		must.True(t, ok, must.Sprintf("schema %s describes no Go type the test knows", name))
		must.Eq(t, jsonFields(t, typ), slices.Sorted(maps.Keys(s.Properties)), must.Sprintf("schema %s vs %s", name, typ))
		for _, r := range s.Required {
			_, ok := s.Properties[r]
			must.True(t, ok, must.Sprintf("schema %s requires %s, which it does not have", name, r))
		}
	}
	for name := range types {
		_, ok := doc.Components.Schemas[name]
		must.True(t, ok, must.Sprintf("no schema %s", name))
	}
}

// jsonFields returns the names encoding/json gives typ's fields, sorted.
func jsonFields(t *testing.T, typ reflect.Type) []string {
	t.Helper()
	var names []string
	for f := range typ.Fields() {
		if !f.IsExported() {
			continue
		}
		must.False(t, f.Anonymous, must.Sprintf("%s embeds %s; flatten it in the test", typ, f.Name))
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// The list routes document the query parameters a client sends
// (api.ListQuery; the nodes' pages only), and the headers of a page.
func TestOpenAPI_ListParameters(t *testing.T) {
	doc := loadDoc(t)
	full := api.ListQuery{States: []structs.JobState{structs.JobQueued}, Queues: []string{"q"}, User: "u", Prefix: "p",
		PerPage: 1, NextToken: "t", Reverse: true}
	sent := slices.Sorted(maps.Keys(full.Values()))
	for path, want := range map[string][]string{
		"/v1/jobs":  sent,
		"/v1/queue": slices.DeleteFunc(slices.Clone(sent), func(s string) bool { return s == "state" }),
		"/v1/nodes": {"next_token", "per_page"},
	} {
		var op struct {
			Parameters []struct {
				Ref string `json:"$ref"`
			} `json:"parameters"`
			Responses map[string]struct {
				Headers map[string]json.RawMessage `json:"headers"`
			} `json:"responses"`
		}
		must.NoError(t, json.Unmarshal(doc.Paths[path]["get"], &op))
		var names []string
		for _, p := range op.Parameters {
			var param struct {
				Name string `json:"name"`
				In   string `json:"in"`
			}
			must.NoError(t, json.Unmarshal(doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")], &param))
			must.Eq(t, "query", param.In)
			names = append(names, param.Name)
		}
		slices.Sort(names)
		must.Eq(t, want, names, must.Sprint(path))
		headers := []string{api.NextTokenHeader, api.TotalHeader}
		if path != "/v1/nodes" { // a node says it is stale itself
			headers = append(headers, api.StaleAsOfHeader)
		}
		slices.Sort(headers)
		must.Eq(t, headers, slices.Sorted(maps.Keys(op.Responses["200"].Headers)), must.Sprint(path))
	}
}
