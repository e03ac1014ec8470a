package planner

import (
	"fmt"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// nodeModels reads the GPU model of an allocation from a round's nodes: a
// job's GPUs are all of one model (policy.Validate's one-model rule), so
// the model of any one of its nodes is the job's. The index by node ID is
// built on the first look-up, and only where the nodes are of more than
// one model.
type nodeModels struct {
	nodes []policy.Node
	built bool
	one   string            // the model of every node, where there is one
	byID  map[string]string // node ID -> model, where there are several
}

// of returns the GPU model of allocation a's nodes, which must be the
// round's (a plan's are: Validate); "" for an empty allocation, or nodes
// that report no model.
func (m *nodeModels) of(a policy.Allocation) string {
	if !m.built {
		m.build()
	}
	for id, g := range a {
		if g <= 0 {
			continue
		}
		if m.byID == nil {
			return m.one // a plan's nodes are the round's (Validate)
		}
		return m.byID[id]
	}
	return ""
}

func (m *nodeModels) build() {
	m.built = true
	if len(m.nodes) == 0 {
		return
	}
	m.one = m.nodes[0].GPUModel
	for i := range m.nodes {
		if m.nodes[i].GPUModel != m.one {
			m.byID = make(map[string]string, len(m.nodes))
			for k := range m.nodes {
				m.byID[m.nodes[k].ID] = m.nodes[k].GPUModel
			}
			return
		}
	}
}

// EventModel is the type of the event that says a job moved from GPUs of
// one model to another's, and why.
const EventModel = "gpu-model"

// modelEvent is the event of job j (its record before the change) taking
// gpus GPUs of model where it last ran on another model: "moved from
// V100 to A100: <the policy's reason>". None for a first start, a change
// on the same model, or a model unknown.
func modelEvent(j *structs.Job, model string, gpus int, reason string, now time.Time) (structs.Event, bool) {
	last := j.LastModel()
	if gpus <= 0 || model == "" || last == "" || last == model {
		return structs.Event{}, false
	}
	msg := fmt.Sprintf("moved from %s to %s", last, model)
	if reason != "" {
		msg += ": " + structs.Clip(reason, structs.MaxModelReason)
	}
	return structs.Event{Time: now, Type: EventModel, Message: msg}, true
}
