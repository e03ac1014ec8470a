// Package config reads the planner agent's HCL configuration
// (`schedulearn agent -config planner.hcl`): Default, then Load the file
// over it, then Validate. Errors are HCL diagnostics with file:line:col.
//
//	bind_addr      = "127.0.0.1:4680"
//	data_dir       = "/var/lib/schedulearn"
//	round_interval = "10s"
//	plugin_dir     = "/opt/schedulearn/plugins"
//	token          = "..."            # for API writes (and reads); or SCHEDULEARN_TOKEN
//	read_token     = "..."            # for API reads only; or SCHEDULEARN_READ_TOKEN
//	allowed_hosts  = ["planner.example"]  # Host names the API answers (besides localhost, IPs, bind/advertise)
//	network_interface = "eth0"        # Horovod's interface between nodes
//	advertise_addr = "http://10.0.0.5:4680"  # the API as training tasks reach it
//	delivery_dir   = "/srv/models"    # delivered models; default <data_dir>/deliveries
//	checkpoint_dirs = ["/shared/ckpt"] # copy checkpoints only from these (default: none, no files delivered)
//	nomad_alloc_dirs = ["/var/lib/nomad/alloc"] # Nomad allocation trees: a job delivers only from its own allocations there
//	delivery_roots = ["/models"]      # where a target's delivery may point (besides delivery_dir)
//	webhook_hosts  = ["hooks.example", "*.hooks.example"]  # hosts a job's webhook may name (default: none)
//
//	nomad {
//	  address = "http://127.0.0.1:4646"
//	  token   = ""
//	  tls { ca_file = "", cert_file = "", key_file = "", insecure = false }
//	}
//	consul {
//	  address = "127.0.0.1:8500"
//	}
//	store {
//	  backend = "embedded"            # or "consul" (several planners, leader election)
//	  prefix  = "schedulearn/"
//	}
//	policy {
//	  name   = "elastic-fifo"
//	  config = { resize_cooldown = "30s" }
//	}
//	pool "a100" {
//	  service = "gpu-workers"         # Consul service whose nodes form the pool
//	  tags    = ["a100"]
//	}
//	queue "vision" {                  # a team's GPUs (see Queue); none: one "default" queue
//	  nominal         = 16            # or per model: { "A100-SXM4-40GB" = 8 }
//	  borrowing_limit = 8
//	  lending_limit   = 4
//	  weight          = 1
//	  parent          = "ml"
//	}
//	recovery {                        # jobs the cluster failed run again (see Recovery)
//	  retries       = 3
//	  stalled_after = "30s"
//	  act_after     = "2m"
//	}
//	retention {                       # finished jobs kept (see Retention)
//	  max_finished = 10000
//	  max_age      = "2160h"
//	}
//	webhook {                         # told of every delivered model
//	  url      = "https://hooks.example/schedulearn"
//	  headers  = { Authorization = "Bearer ..." }
//	  timeout  = "10s"                # per attempt
//	  attempts = 4                    # with backoff 1s, 2s, 4s, ...
//	}
//
// A config is bounded before it is parsed (internal/hclsafe): at most 256
// KiB, nested at most 32 deep, at most 1,000 operators and 1,000 items per
// list or object, no for-expressions and no function calls; each refusal
// is an error at file:line:col.
package config

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/schedulearn/schedulearn/internal/hclsafe"
	"github.com/schedulearn/schedulearn/planner/quota"
)

// Store backends.
const (
	StoreEmbedded = "embedded"
	StoreConsul   = "consul"
)

// Config is the planner agent's configuration.
type Config struct {
	BindAddr      string `hcl:"bind_addr,optional"`
	DataDir       string `hcl:"data_dir,optional"`
	RoundInterval string `hcl:"round_interval,optional"`
	PluginDir     string `hcl:"plugin_dir,optional"`
	Token         string `hcl:"token,optional"`
	// ReadToken authorises API reads only (job records, nodes, policies);
	// it must differ from Token, which reads too. Empty: reads need Token.
	ReadToken string `hcl:"read_token,optional"`
	// AllowedHosts are host names the API answers (the Host header),
	// besides localhost, IP addresses, and the hosts of bind_addr and
	// advertise_addr: DNS-rebinding protection. "*" allows any.
	AllowedHosts []string `hcl:"allowed_hosts,optional"`
	LogLevel     string   `hcl:"log_level,optional"`
	// NetworkInterface is the interface Horovod uses between nodes
	// (horovodrun --network-interface); "" lets Horovod choose.
	NetworkInterface string `hcl:"network_interface,optional"`
	// AdvertiseAddr is the API's address as the training tasks reach it
	// to report progress (SCHEDULEARN_ADDR in their environment): an
	// http(s) URL or host:port. Empty: http://<the address the API listens
	// on>, with an unspecified host (0.0.0.0, ::) replaced by the
	// machine's hostname.
	AdvertiseAddr string `hcl:"advertise_addr,optional"`
	// DeliveryDir is where the models of jobs whose target names no
	// delivery directory are delivered (<dir>/<job-id>/<tier>/); empty:
	// <data_dir>/deliveries (see DeliveryPath).
	DeliveryDir string `hcl:"delivery_dir,optional"`
	// CheckpointDirs are the only directories the planner copies
	// delivered checkpoints from, following no link beneath them: a job
	// chooses the path it reports, so this is where jobs write
	// checkpoints, and nothing else. Empty: no files are delivered.
	CheckpointDirs []string `hcl:"checkpoint_dirs,optional"`
	// NomadAllocDirs are Nomad allocation trees (a Nomad client's
	// <data_dir>/alloc) that checkpoint_dirs reach: a checkpoint in one
	// is copied only from an allocation of the reporting job's own, and
	// never from a task's secrets/ or private/ directory. Name the tree of
	// every client whose allocation dirs the planner can read.
	NomadAllocDirs []string `hcl:"nomad_alloc_dirs,optional"`
	// DeliveryRoots are the directories a target's own delivery directory
	// may lie under, besides DeliveryPath; a jobspec whose delivery lies
	// elsewhere is refused.
	DeliveryRoots []string `hcl:"delivery_roots,optional"`
	// WebhookHosts are the hosts a job's own webhook (its target's) may
	// name: "host", "host:port", "*.domain". Empty: no job may name one.
	// The webhook block's URL is the operator's and needs no entry.
	WebhookHosts []string `hcl:"webhook_hosts,optional"`

	Nomad  *Nomad  `hcl:"nomad,block"`
	Consul *Consul `hcl:"consul,block"`
	Store  *Store  `hcl:"store,block"`
	Policy *Policy `hcl:"policy,block"`
	Pools  []*Pool `hcl:"pool,block"`
	// Queues are the queue blocks (see Queue); QueueTree is what Validate
	// builds of them.
	Queues []*Queue `hcl:"queue,block"`
	// Webhook, when set, is told of every delivered model.
	Webhook *Webhook `hcl:"webhook,block"`
	// Recovery is how jobs the cluster failed are run again, and the
	// health watch (see Recovery); Default has one.
	Recovery *Recovery `hcl:"recovery,block"`
	// Retention is how long finished jobs are kept (see Retention);
	// Default has one.
	Retention *Retention `hcl:"retention,block"`

	// Round is RoundInterval parsed by Validate.
	Round time.Duration
	// QueueTree is the queues, validated (quota.Default() without any).
	QueueTree *quota.Tree
	// File is where the config was loaded from ("" for defaults only).
	File string

	ranges map[string]hcl.Range // attribute ranges, for Validate's diagnostics
}

// Nomad is how the planner reaches Nomad.
type Nomad struct {
	Address   string `hcl:"address,optional"`
	Token     string `hcl:"token,optional"`
	Region    string `hcl:"region,optional"`
	Namespace string `hcl:"namespace,optional"`
	TLS       *TLS   `hcl:"tls,block"`
}

// Consul is how the planner reaches Consul (pools, and the consul store).
type Consul struct {
	Address string `hcl:"address,optional"`
	Token   string `hcl:"token,optional"`
	TLS     *TLS   `hcl:"tls,block"`
}

// TLS is a client TLS configuration.
type TLS struct {
	CAFile   string `hcl:"ca_file,optional"`
	CertFile string `hcl:"cert_file,optional"`
	KeyFile  string `hcl:"key_file,optional"`
	Insecure bool   `hcl:"insecure,optional"`
}

// Webhook is told of every delivered model: a POST of a JSON body (see
// delivery.WebhookBody) with Headers, retried with backoff.
type Webhook struct {
	URL     string            `hcl:"url"`
	Headers map[string]string `hcl:"headers,optional"`
	// Timeout bounds one attempt (DefaultWebhookTimeout when empty).
	Timeout string `hcl:"timeout,optional"`
	// Attempts is how often a delivery is sent before giving up
	// (DefaultWebhookAttempts when nil).
	Attempts *int `hcl:"attempts,optional"`

	// TimeoutDuration is Timeout parsed by Validate.
	TimeoutDuration time.Duration
}

// Webhook defaults and bounds.
const (
	DefaultWebhookTimeout  = 10 * time.Second
	DefaultWebhookAttempts = 4
	MaxWebhookTimeout      = 5 * time.Minute
	MaxWebhookAttempts     = 10
)

// Store says where the planner keeps its queue and records.
type Store struct {
	Backend string `hcl:"backend,optional"`
	Path    string `hcl:"path,optional"`
	Prefix  string `hcl:"prefix,optional"`
}

// Policy is the active scheduling policy at start (the one stored by
// `schedulearn policy set` wins over it after a restart, until the config's
// policy block changes).
type Policy struct {
	Name   string            `hcl:"name"`
	Config map[string]string `hcl:"config,optional"`
}

// Pool is a worker pool: the nodes that carry a Consul service (and tags).
type Pool struct {
	Name    string   `hcl:"name,label"`
	Service string   `hcl:"service"`
	Tags    []string `hcl:"tags,optional"`
}

// Default is the configuration of a planner on a local lab.
func Default() *Config {
	return &Config{
		BindAddr:      "127.0.0.1:4680",
		DataDir:       "schedulearn-data",
		RoundInterval: "10s",
		LogLevel:      "INFO",
		Nomad:         &Nomad{Address: "http://127.0.0.1:4646"},
		Consul:        &Consul{Address: "127.0.0.1:8500"},
		Store:         &Store{Backend: StoreEmbedded, Prefix: "schedulearn/"},
		Policy:        &Policy{Name: "elastic-fifo"},
		Recovery:      defaultRecovery(),
		Retention:     defaultRetention(),
	}
}

// Load reads the file at path over the defaults and validates the result.
func Load(path string) (*Config, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Failed to read config", Detail: err.Error()}}
	}
	return Parse(src, path)
}

// Parse reads config source over the defaults and validates the result.
// The source is bounded before it is parsed (hclsafe.DefaultLimits), and
// for-expressions and function calls are refused.
func Parse(src []byte, filename string) (*Config, hcl.Diagnostics) {
	body, diags := hclsafe.ParseConfig(src, filename, hclsafe.DefaultLimits())
	if diags.HasErrors() {
		return nil, diags
	}
	var loaded Config
	diags = append(diags, gohcl.DecodeBody(body, nil, &loaded)...)
	if diags.HasErrors() {
		return nil, diags
	}
	cfg := Default().Merge(&loaded)
	cfg.File = filename
	cfg.ranges = map[string]hcl.Range{}
	collectRanges(body, "", cfg.ranges)
	diags = append(diags, cfg.Validate()...)
	if diags.HasErrors() {
		return nil, diags
	}
	return cfg, diags
}

// Merge returns c with every value o sets laid over it.
func (c *Config) Merge(o *Config) *Config {
	r := *c
	setStr(&r.BindAddr, o.BindAddr)
	setStr(&r.DataDir, o.DataDir)
	setStr(&r.RoundInterval, o.RoundInterval)
	setStr(&r.PluginDir, o.PluginDir)
	setStr(&r.Token, o.Token)
	setStr(&r.ReadToken, o.ReadToken)
	setStr(&r.LogLevel, o.LogLevel)
	setStr(&r.NetworkInterface, o.NetworkInterface)
	setStr(&r.AdvertiseAddr, o.AdvertiseAddr)
	setStr(&r.DeliveryDir, o.DeliveryDir)
	for _, l := range []struct{ dst, src *[]string }{
		{&r.CheckpointDirs, &o.CheckpointDirs}, {&r.NomadAllocDirs, &o.NomadAllocDirs}, {&r.DeliveryRoots, &o.DeliveryRoots},
		{&r.WebhookHosts, &o.WebhookHosts}, {&r.AllowedHosts, &o.AllowedHosts},
	} {
		if *l.src != nil {
			*l.dst = slices.Clone(*l.src)
		}
	}
	if o.Webhook != nil {
		w := *o.Webhook
		r.Webhook = &w
	}
	if o.Nomad != nil {
		n := *r.Nomad
		setStr(&n.Address, o.Nomad.Address)
		setStr(&n.Token, o.Nomad.Token)
		setStr(&n.Region, o.Nomad.Region)
		setStr(&n.Namespace, o.Nomad.Namespace)
		if o.Nomad.TLS != nil {
			n.TLS = o.Nomad.TLS
		}
		r.Nomad = &n
	}
	if o.Consul != nil {
		n := *r.Consul
		setStr(&n.Address, o.Consul.Address)
		setStr(&n.Token, o.Consul.Token)
		if o.Consul.TLS != nil {
			n.TLS = o.Consul.TLS
		}
		r.Consul = &n
	}
	if o.Store != nil {
		s := *r.Store
		setStr(&s.Backend, o.Store.Backend)
		setStr(&s.Path, o.Store.Path)
		setStr(&s.Prefix, o.Store.Prefix)
		r.Store = &s
	}
	if o.Policy != nil {
		r.Policy = o.Policy
	}
	if len(o.Pools) > 0 {
		r.Pools = o.Pools
	}
	if len(o.Queues) > 0 {
		r.Queues = o.Queues
	}
	r.Recovery = mergeRecovery(cmp.Or(r.Recovery, defaultRecovery()), o.Recovery)
	r.Retention = mergeRetention(cmp.Or(r.Retention, defaultRetention()), o.Retention)
	return &r
}

func setStr(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// Validate checks the values and fills in what derives from them.
func (c *Config) Validate() hcl.Diagnostics {
	var diags hcl.Diagnostics
	errAt := func(key, summary, detail string) {
		d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail}
		if r, ok := c.ranges[key]; ok {
			d.Subject = r.Ptr()
		}
		diags = append(diags, d)
	}
	if _, _, err := net.SplitHostPort(c.BindAddr); err != nil {
		errAt("bind_addr", "Invalid bind_addr", fmt.Sprintf("%q: give host:port, e.g. \"127.0.0.1:4680\".", c.BindAddr))
	}
	if c.AdvertiseAddr != "" {
		if _, err := NormalizeAddr(c.AdvertiseAddr); err != nil {
			errAt("advertise_addr", "Invalid advertise_addr", fmt.Sprintf("%q: give the planner's API as the training tasks reach it, e.g. \"http://10.0.0.5:4680\".", c.AdvertiseAddr))
		}
	}
	d, err := time.ParseDuration(c.RoundInterval)
	if err != nil || d <= 0 {
		errAt("round_interval", "Invalid round_interval", fmt.Sprintf("%q: give a positive duration, e.g. \"10s\".", c.RoundInterval))
	}
	c.Round = d
	switch c.Store.Backend {
	case StoreEmbedded, StoreConsul:
	default:
		errAt("store.backend", "Invalid store backend", fmt.Sprintf("%q: backend is %q (one planner) or %q (several planners, leader election).", c.Store.Backend, StoreEmbedded, StoreConsul))
	}
	if c.Policy.Name == "" {
		errAt("policy.name", "Missing policy name", "Name the active policy, e.g. \"elastic-fifo\".")
	}
	seen := map[string]bool{}
	for _, p := range c.Pools {
		if seen[p.Name] {
			errAt("pool."+p.Name, "Duplicate pool", fmt.Sprintf("Pool %q is defined twice.", p.Name))
		}
		seen[p.Name] = true
	}
	if w := c.Webhook; w != nil {
		c.validateWebhook(w, errAt)
	}
	c.validateAccess(errAt)
	if c.Recovery == nil {
		c.Recovery = defaultRecovery()
	}
	c.validateRecovery(errAt)
	if c.Retention == nil {
		c.Retention = defaultRetention()
	}
	c.validateRetention(errAt)
	diags = append(diags, c.validateQueues()...)
	switch c.LogLevel {
	case "TRACE", "DEBUG", "INFO", "WARN", "ERROR":
	default:
		errAt("log_level", "Invalid log_level", fmt.Sprintf("%q: one of TRACE, DEBUG, INFO, WARN, ERROR.", c.LogLevel))
	}
	return diags
}

func (c *Config) validateWebhook(w *Webhook, errAt func(key, summary, detail string)) {
	if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errAt("webhook.url", "Invalid webhook url", fmt.Sprintf("%q: give the http(s) URL the planner POSTs each delivered model to.", w.URL))
	}
	for _, name := range slices.Sorted(maps.Keys(w.Headers)) {
		if !validHeaderName(name) || strings.ContainsAny(w.Headers[name], "\r\n\x00") {
			errAt("webhook.headers", "Invalid webhook header", fmt.Sprintf("%q: a header name is letters, digits and -_.!#$%%&'*+^`|~; a value is one line.", name))
			break
		}
	}
	w.TimeoutDuration = DefaultWebhookTimeout
	if w.Timeout != "" {
		d, err := time.ParseDuration(w.Timeout)
		if err != nil || d <= 0 || d > MaxWebhookTimeout {
			errAt("webhook.timeout", "Invalid webhook timeout", fmt.Sprintf("%q: give a positive duration of at most %s, e.g. \"10s\".", w.Timeout, MaxWebhookTimeout))
		}
		w.TimeoutDuration = d
	}
	if w.Attempts != nil && (*w.Attempts < 1 || *w.Attempts > MaxWebhookAttempts) {
		errAt("webhook.attempts", "Invalid webhook attempts", fmt.Sprintf("%d: attempts is from 1 to %d.", *w.Attempts, MaxWebhookAttempts))
	}
}

// MaxAttempts is how often the webhook is tried per delivery.
func (w *Webhook) MaxAttempts() int {
	if w.Attempts == nil {
		return DefaultWebhookAttempts
	}
	return *w.Attempts
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("-_.!#$%&'*+^`|~", r):
		default:
			return false
		}
	}
	return true
}

// DeliveryPath is the default directory of delivered models.
func (c *Config) DeliveryPath() string {
	if c.DeliveryDir != "" {
		return c.DeliveryDir
	}
	return filepath.Join(c.DataDir, "deliveries")
}

// NormalizeAddr turns an API address (a URL, or host:port) into an
// http(s) URL without a trailing slash.
func NormalizeAddr(addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "", fmt.Errorf("invalid address %q: want http(s)://host:port", addr)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// StorePath is the embedded store's file.
func (c *Config) StorePath() string {
	if c.Store.Path != "" {
		return c.Store.Path
	}
	return c.DataDir + "/planner.db"
}

// collectRanges records the range of every attribute, keyed by its path
// ("store.backend"), and of every labelled block ("pool.a100") and its
// attributes ("queue.vision.parent").
func collectRanges(body *hclsyntax.Body, prefix string, out map[string]hcl.Range) {
	for name, a := range body.Attributes {
		out[prefix+name] = a.SrcRange
	}
	for _, b := range body.Blocks {
		key := prefix + b.Type
		if len(b.Labels) > 0 {
			out[key+"."+b.Labels[0]] = b.DefRange()
			collectRanges(b.Body, key+"."+b.Labels[0]+".", out)
		}
		collectRanges(b.Body, key+".", out)
	}
}
