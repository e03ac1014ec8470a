package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// NodeGroup is a group of identical nodes of a heterogeneous cluster
// (Config.Groups): Nodes nodes of GPUsPerNode GPUs of model Model (the
// nodes' policy.Node.GPUModel; "" on a cluster of one model).
type NodeGroup struct {
	Nodes       int    `json:"nodes"`
	GPUsPerNode int    `json:"gpus_per_node"`
	Model       string `json:"model,omitempty"`
}

// String is the group as ParseCluster reads it: nodes x GPUs a node, and
// the model after a colon.
func (g NodeGroup) String() string {
	s := fmt.Sprintf("%dx%d", g.Nodes, g.GPUsPerNode)
	if g.Model != "" {
		s += ":" + g.Model
	}
	return s
}

// Bounds of a cluster spec, far beyond any cluster the simulator is run on
// and small enough that a run's per-GPU state fits in memory.
const (
	// MaxNodes bounds the nodes of a cluster (all groups together).
	MaxNodes = 1 << 17
	// MaxGPUsPerNode bounds a node's GPUs.
	MaxGPUsPerNode = 64
	// MaxGroups bounds the groups of a cluster spec.
	MaxGroups = 256
	// maxClusterFile bounds a cluster file's size.
	maxClusterFile = 1 << 20
	// maxModelName bounds a GPU model's name.
	maxModelName = 64
)

// SiaCluster is the heterogeneous cluster of Sia's evaluation (SOSP'23,
// simulator_config.py): 6 nodes x 4 T4 ("aws"), 3 x 8 RTX 2080Ti ("rtx"),
// 2 x 8 A100 ("dgx-ext"), 64 GPUs.
func SiaCluster() []NodeGroup {
	return []NodeGroup{{6, 4, "aws"}, {3, 8, "rtx"}, {2, 8, "dgx-ext"}}
}

// ParseCluster reads a cluster spec: groups separated by commas, each
// "<nodes>x<gpus a node>:<model>" (e.g. "6x4:aws,3x8:rtx,2x8:dgx-ext").
// known, if not nil, are the models the caller has job models for; any
// other model is an error. A model may appear in one group only.
func ParseCluster(spec string, known map[string]bool) ([]NodeGroup, error) {
	var groups []NodeGroup
	for i, part := range strings.Split(spec, ",") {
		g, err := parseGroup(part, known)
		if err != nil {
			return nil, fmt.Errorf("cluster %q, group %d: %w", spec, i+1, err)
		}
		groups = append(groups, g)
	}
	if err := checkGroups(groups); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", spec, err)
	}
	return groups, nil
}

// LoadClusterFile reads a cluster file: one group a line as ParseCluster
// reads one ("6x4:aws"), blank lines and lines from "#" on ignored. Errors
// name the file and line (ParseError).
func LoadClusterFile(path string, known map[string]bool) ([]NodeGroup, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read cluster: %w", err)
	}
	defer f.Close()
	return readCluster(path, io.LimitReader(f, maxClusterFile+1), known)
}

func readCluster(path string, r io.Reader, known map[string]bool) ([]NodeGroup, error) {
	var groups []NodeGroup
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64*1024)
	line, size := 0, 0
	for sc.Scan() {
		line++
		size += len(sc.Bytes()) + 1
		if size > maxClusterFile {
			return nil, &ParseError{Path: path, Line: line, Err: fmt.Errorf("the file is larger than %d bytes", maxClusterFile)}
		}
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		g, err := parseGroup(text, known)
		if err != nil {
			return nil, &ParseError{Path: path, Line: line, Err: err}
		}
		groups = append(groups, g)
		if err := checkGroups(groups); err != nil {
			return nil, &ParseError{Path: path, Line: line, Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &ParseError{Path: path, Line: line + 1, Err: err}
	}
	if len(groups) == 0 {
		return nil, &ParseError{Path: path, Err: errors.New("no node groups")}
	}
	return groups, nil
}

// parseGroup reads "<nodes>x<gpus>:<model>".
func parseGroup(s string, known map[string]bool) (NodeGroup, error) {
	s = strings.TrimSpace(s)
	size, model, hasModel := strings.Cut(s, ":")
	ns, gs, ok := strings.Cut(strings.TrimSpace(size), "x")
	if !ok || !hasModel {
		return NodeGroup{}, fmt.Errorf("%q is not <nodes>x<gpus a node>:<model>, e.g. 6x4:aws", s)
	}
	nodes, err := strconv.Atoi(strings.TrimSpace(ns))
	if err != nil || nodes < 1 || nodes > MaxNodes {
		return NodeGroup{}, fmt.Errorf("nodes %q is not a whole number from 1 to %d", strings.TrimSpace(ns), MaxNodes)
	}
	gpus, err := strconv.Atoi(strings.TrimSpace(gs))
	if err != nil || gpus < 1 || gpus > MaxGPUsPerNode {
		return NodeGroup{}, fmt.Errorf("GPUs a node %q is not a whole number from 1 to %d", strings.TrimSpace(gs), MaxGPUsPerNode)
	}
	model = strings.TrimSpace(model)
	if err := checkModelName(model); err != nil {
		return NodeGroup{}, err
	}
	if known != nil && !known[model] {
		return NodeGroup{}, fmt.Errorf("GPU model %q is not one of %s", model, strings.Join(sortedKeys(known), ", "))
	}
	return NodeGroup{Nodes: nodes, GPUsPerNode: gpus, Model: model}, nil
}

// checkModelName refuses an empty or odd GPU model name: letters, digits,
// '.', '_' and '-', at most maxModelName bytes.
func checkModelName(m string) error {
	if m == "" || len(m) > maxModelName {
		return fmt.Errorf("GPU model %q is empty or longer than %d bytes", m, maxModelName)
	}
	for _, r := range m {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("GPU model %q has %q: only letters, digits, '.', '_' and '-'", m, r)
		}
	}
	return nil
}

// checkGroups checks a cluster's groups together: at most MaxGroups and
// MaxNodes, each model in one group.
func checkGroups(groups []NodeGroup) error {
	if len(groups) > MaxGroups {
		return fmt.Errorf("more than %d node groups", MaxGroups)
	}
	nodes := 0
	seen := make(map[string]bool, len(groups))
	for _, g := range groups {
		nodes += g.Nodes
		if seen[g.Model] {
			return fmt.Errorf("GPU model %q is in two groups: give each model one group", g.Model)
		}
		seen[g.Model] = true
	}
	if nodes > MaxNodes {
		return fmt.Errorf("%d nodes in all, more than %d", nodes, MaxNodes)
	}
	return nil
}

// ClusterString writes groups as ParseCluster reads them.
func ClusterString(groups []NodeGroup) string {
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = g.String()
	}
	return strings.Join(parts, ",")
}
