package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// NodeSpec is one host of a multi-host lab, as the Terraform local lab's
// `nodes` variable describes it (terraform/labs/local/variables.tf).
type NodeSpec struct {
	Name     string            `json:"name"`
	Pool     string            `json:"pool,omitempty"`
	GPU      GPUSpec           `json:"gpu"`
	Meta     map[string]string `json:"meta,omitempty"`
	Datasets []string          `json:"datasets,omitempty"`
}

// GPUSpec is a node's device plugin: backend, and what it simulates.
type GPUSpec struct {
	Backend   string `json:"backend,omitempty"`
	Model     string `json:"model,omitempty"`
	Count     int    `json:"count,omitempty"`
	MemoryMiB int    `json:"memory_mib,omitempty"`
	Seed      string `json:"seed,omitempty"`
}

// DefaultNodes is the lab `make lab HOSTS=n` runs: n hosts with 4
// simulated A100s each in pool a100, and from three hosts on, the last
// one with 2 simulated V100s in pool v100 (Terraform's default for three).
func DefaultNodes(n int) []NodeSpec {
	var nodes []NodeSpec
	for i := 1; i <= n; i++ {
		node := NodeSpec{Name: fmt.Sprintf("node%d", i), Pool: "a100", GPU: GPUSpec{Count: 4}}
		if n >= 3 && i == n {
			node.Pool = "v100"
			node.GPU = GPUSpec{Count: 2, Model: "Tesla V100-SXM2-16GB", MemoryMiB: 16384}
		}
		nodes = append(nodes, node)
	}
	return nodes
}

// rendered is what the Terraform local lab outputs.
type rendered struct {
	Hosts []struct {
		Name         string   `json:"name"`
		Address      string   `json:"address"`
		Servers      bool     `json:"servers"`
		Planner      bool     `json:"planner"`
		Pool         string   `json:"pool"`
		ConsulConfig string   `json:"consul_config"`
		NomadConfigs []string `json:"nomad_configs"`
	} `json:"hosts"`
	Network struct {
		Subnet        string `json:"subnet"`
		BridgeAddress string `json:"bridge_address"`
		PrefixLength  int    `json:"prefix_length"`
	} `json:"network"`
	NomadAddress  string `json:"nomad_address"`
	ConsulAddress string `json:"consul_address"`
	Planners      []struct {
		Host    string `json:"host"`
		Address string `json:"address"`
		Config  string `json:"config"`
	} `json:"planners"`
	PlannerAddress       string `json:"planner_address"`
	PlannerProxyAddress  string `json:"planner_proxy_address"`
	PlannerJobspec       string `json:"planner_jobspec"`
	PlannerTokenVariable string `json:"planner_token_variable"`
}

// terraformEnv is Terraform's environment: no version check, no CLI
// config (no provider registry is reachable, none is needed), its working
// data in dataDir rather than the source tree.
func terraformEnv(dataDir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "TF_") || strings.HasPrefix(k, "TOFU_") || k == "CHECKPOINT_DISABLE" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE=/dev/null", "TF_IN_AUTOMATION=1",
		"TF_DATA_DIR="+dataDir)
}

// render applies the Terraform root in dir with vars (written to
// <runDir>/lab.tfvars.json, state in the run dir) and reads its outputs.
func render(ctx context.Context, bin, dir, runDir string, vars map[string]any, extraVarFile string) (*rendered, error) {
	varFile := filepath.Join(runDir, "lab.tfvars.json")
	b, err := json.MarshalIndent(vars, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("failed to encode terraform variables: %w", err)
	}
	if err := os.WriteFile(varFile, b, 0o600); err != nil {
		return nil, fmt.Errorf("failed to write terraform variables: %w", err)
	}
	state := filepath.Join(runDir, "terraform.tfstate")
	env := terraformEnv(filepath.Join(runDir, "terraform"))
	run := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, bin, append([]string{"-chdir=" + dir}, args...)...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("failed to run terraform %s in %s: %w\n%s%s", args[0], dir, err, stdout.Bytes(), stderr.Bytes())
		}
		return stdout.Bytes(), nil
	}
	if _, err := run("init", "-backend=false", "-input=false", "-no-color"); err != nil {
		return nil, err
	}
	apply := []string{"apply", "-auto-approve", "-input=false", "-no-color", "-state=" + state}
	if extraVarFile != "" {
		apply = append(apply, "-var-file="+extraVarFile)
	}
	apply = append(apply, "-var-file="+varFile)
	if _, err := run(apply...); err != nil {
		return nil, err
	}
	out, err := run("output", "-json", "-no-color", "-state="+state)
	if err != nil {
		return nil, err
	}
	var raw map[string]struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, fmt.Errorf("failed to decode terraform outputs: %w", err)
	}
	fields := map[string]any{}
	for k, v := range raw {
		fields[k] = v.Value
	}
	b, _ = json.Marshal(fields)
	var r rendered
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("failed to decode terraform outputs: %w", err)
	}
	if len(r.Hosts) == 0 {
		return nil, fmt.Errorf("failed to render the lab: terraform in %s output no hosts", dir)
	}
	return &r, nil
}
