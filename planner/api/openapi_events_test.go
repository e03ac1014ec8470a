package api_test

import (
	"encoding/json"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/depwatch"
)

// The document's event types include those the dependency watch
// publishes.
func TestOpenAPI_StreamEventTypesIncludeDependencies(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas struct {
				StreamEvent struct {
					Properties struct {
						Type struct {
							Enum []string `json:"enum"`
						} `json:"type"`
					} `json:"properties"`
				} `json:"StreamEvent"`
			} `json:"schemas"`
		} `json:"components"`
	}
	must.NoError(t, json.Unmarshal(api.OpenAPI, &doc))
	for _, typ := range []string{depwatch.StreamDependencyDown, depwatch.StreamDependencyUp} {
		must.SliceContains(t, doc.Components.Schemas.StreamEvent.Properties.Type.Enum, typ)
	}
}
