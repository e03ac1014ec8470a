// Package wire names the policy plugin protocol that both sides speak: the
// contract's Serve (the plugin process) and the host's client (the planner).
// It holds only names and bounds, so that neither side imports the other.
//
// The service, without generated code, is
//
//	service schedulearn.policy.v1.Policy {
//	  rpc PluginInfo(google.protobuf.BytesValue) returns (google.protobuf.BytesValue);
//	  rpc SetConfig (google.protobuf.BytesValue) returns (google.protobuf.BytesValue);
//	  rpc Plan      (google.protobuf.BytesValue) returns (google.protobuf.BytesValue);
//	}
//
// and each BytesValue holds JSON: PluginInfo takes nothing ({}) and returns
// an Info; SetConfig takes a JSON object of strings and returns {}; Plan
// takes a Snapshot and returns a Plan (the json tags of package policy are
// the schema). A policy's error is a gRPC status with its message. Carrying
// JSON in a well-known proto message keeps gRPC's default codec, so
// go-plugin's own services (health, broker, stdio) are untouched, and a
// plugin in another language needs only the well-known types and a JSON
// library.
package wire

// ServiceName is the gRPC service of a policy plugin.
const ServiceName = "schedulearn.policy.v1.Policy"

// The service's methods.
const (
	MethodPluginInfo = "PluginInfo"
	MethodSetConfig  = "SetConfig"
	MethodPlan       = "Plan"
)

// MaxMessage bounds one message: a snapshot of tens of thousands of jobs is
// a few MiB of JSON, above gRPC's 4 MiB default.
const MaxMessage = 256 << 20

// PluginKey is the name the policy is dispensed under in go-plugin's plugin
// set.
const PluginKey = "policy"

// FullMethod returns the gRPC path of method, as clients invoke it.
func FullMethod(method string) string { return "/" + ServiceName + "/" + method }
