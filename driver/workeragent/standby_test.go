package workeragent

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

// The standby takes the commands that run its interpreter (directly, or a
// script whose #! line names it) with an environment that leaves the
// interpreter's startup as it was; it leaves every other command to the
// shell.
func TestStandby_Request(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	must.NoError(t, os.Mkdir(bin, 0o755))
	python := filepath.Join(bin, "python3")
	must.NoError(t, os.WriteFile(python, []byte("#!/bin/sh\n"), 0o755))
	must.NoError(t, os.Symlink("python3", filepath.Join(bin, "python")))
	must.NoError(t, os.WriteFile(filepath.Join(bin, "torchrun"), []byte("#!"+python+"\nimport sys\n"), 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(bin, "other"), []byte("#!/bin/sh\n"), 0o755))
	s := &Standby{Python: python, Dir: "/work", Env: []string{"PATH=" + bin + ":/usr/bin", "PYTHONPATH=/lib/x", "KEEP=1"}}
	cases := []struct {
		name    string
		command string
		argv    []string // nil: not for the standby
		env     map[string]string
	}{
		{"horovodrun's command line", "env HOROVOD_RANK=2 PYTHONUNBUFFERED=1 NAME='two words' " + python + " /train.py --lr 0.1",
			[]string{"/train.py", "--lr", "0.1"}, map[string]string{"HOROVOD_RANK": "2", "PYTHONUNBUFFERED": "1", "NAME": "two words", "KEEP": "1"}},
		{"found on PATH, a module", "python -m pkg.train", []string{"-m", "pkg.train"}, map[string]string{"KEEP": "1"}},
		{"-u", python + " -u /train.py", []string{"/train.py"}, map[string]string{"PYTHONUNBUFFERED": "1"}},
		{"a console script of the interpreter", "env 'A=1' 'env' 'GLOO_SOCKET_IFNAME=lo' 'torchrun' '--nnodes=1:2' '/train.py'",
			[]string{filepath.Join(bin, "torchrun"), "--nnodes=1:2", "/train.py"}, map[string]string{"A": "1", "GLOO_SOCKET_IFNAME": "lo"}},
		{"another program", "other /train.py", nil, nil},
		{"a shell construct", python + " /train.py; rm -rf /", nil, nil},
		{"an expansion", python + " \"$HOME/train.py\"", nil, nil},
		{"another python option", python + " -X dev /train.py", nil, nil},
		{"no script", python, nil, nil},
		{"a startup variable changed", "env PYTHONPATH=/other " + python + " /train.py", nil, nil},
		{"a linker variable added", "env LD_PRELOAD=/x.so " + python + " /train.py", nil, nil},
		{"a relative program path", "./bin/python3 /train.py", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, ok := s.request(tc.command)
			if tc.argv == nil {
				must.False(t, ok, must.Sprintf("took %q as %+v", tc.command, req))
				return
			}
			must.True(t, ok)
			must.Eq(t, tc.argv, req.Argv)
			must.Eq(t, "/work", req.Dir)
			for k, v := range tc.env {
				must.Eq(t, v, req.Env[k], must.Sprint(k))
			}
		})
	}
}

// The first Python command an agent with a standby runs is run by the
// standby interpreter, with the modules it preloaded, the command's argv,
// environment and directory, stdin, stdout, stderr and exit code, with the
// script's name as its process name (its command line is the standby's;
// a cold start's names the script); the next runs in an interpreter
// started for it, without the modules, the same way. Both run with the
// port guard, and with the ports to avoid of the agent's host, not of the
// launcher's (horovodrun copies its own environment onto the command line).
func TestServer_StandbyRunsFirstPythonCommand(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "train.py")
	must.NoError(t, os.WriteFile(script, []byte(`import os, sys
print("warm" if "decimal" in sys.modules else "cold", sys.argv[1:], os.environ["WHO"], os.environ.get("JOB"), os.getcwd() == os.environ["WANT_DIR"])
print([getattr(f, "schedulearn_guard", False) for f in sys.meta_path].count(True), os.environ["SCHEDULEARN_AVOID_PORTS"])
print(open("/proc/self/comm").read().strip())
print(sys.stdin.read().strip(), file=sys.stderr)
sys.exit(int(os.environ.get("CODE", "0")))
`), 0o644))
	env := []string{"PATH=/usr/bin:/bin", "WHO=agent", "WANT_DIR=" + dir, "SCHEDULEARN_AVOID_PORTS=20000-32000"}
	ready := make(chan struct{})
	standby := &Standby{Python: python, Modules: []string{"decimal", "no_such_module"}, Dir: dir, Env: env, Ready: func() { close(ready) }}
	must.NoError(t, standby.Start())
	t.Cleanup(standby.Stop)
	select {
	case <-ready:
	case <-time.After(time.Minute):
		t.Fatal("the standby never said it was ready")
	}
	_, addr := serve(t, &Server{Token: "tok", Dir: dir, Env: env, Logger: hclog.NewNullLogger(), Standby: standby})

	for _, run := range []struct{ want, comm string }{{"warm", "train.py"}, {"cold", "train.py"}} {
		want, comm := run.want, run.comm
		var stdout, stderr bytes.Buffer
		code, err := Run(context.Background(), addr, "tok", "env JOB='a b' CODE=3 PYTHONUNBUFFERED=1 SCHEDULEARN_AVOID_PORTS=1-2 "+python+" "+script+" --lr 0.1",
			strings.NewReader("from stdin\n"), &stdout, &stderr, 5e9)
		must.NoError(t, err)
		must.Eq(t, 3, code)
		must.Eq(t, want+" ['--lr', '0.1'] agent a b True\n1 20000-32000\n"+comm+"\n", stdout.String())
		must.Eq(t, "from stdin\n", stderr.String())
	}
}
