package sshshim

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/driver/workeragent"
	"github.com/schedulearn/schedulearn/internal/drain"
)

// The command lines horovodrun 0.28.1 builds (util/remote.py
// get_ssh_command; the quoted command reaches ssh as one word).
func TestParseArgs(t *testing.T) {
	remote := "cd /alloc/launcher > /dev/null 2>&1 ; env HOROVOD_HOSTNAME=w-1a2b3c4d HOROVOD_RANK=0 PATH=/bin python train.py"
	cases := []struct {
		name string
		args []string
		want Invocation
	}{
		{"horovod default", []string{"-o", "PasswordAuthentication=no", "-o", "StrictHostKeyChecking=no", "w-1a2b3c4d", remote},
			Invocation{Host: "w-1a2b3c4d", Command: remote, ConnectTimeout: 10 * time.Second}},
		{"horovod with port, key and timeout after the host",
			[]string{"-o", "PasswordAuthentication=no", "-o", "StrictHostKeyChecking=no", "w-1a2b3c4d", "-p", "2222", "-i", "/k", "-o", "ConnectTimeout=7", remote},
			Invocation{Host: "w-1a2b3c4d", Command: remote, ConnectTimeout: 7 * time.Second}},
		{"user, flags, attached values, split command",
			[]string{"-nTq", "-p2222", "-lroot", "me@w-9", "echo", "a", "b"},
			Invocation{Host: "w-9", Command: "echo a b", NoStdin: true, ConnectTimeout: 10 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseArgs(tc.args)
			must.NoError(t, err)
			must.Eq(t, tc.want, *got)
		})
	}
	_, err := ParseArgs([]string{"-o", "X=y", "w-1"})
	must.ErrorContains(t, err, "no command")
	_, err = ParseArgs([]string{"-p"})
	must.ErrorContains(t, err, "needs an argument")
}

func TestStripCd(t *testing.T) {
	must.Eq(t, "env A=1 python t.py", StripCd("cd /x/y > /dev/null 2>&1 ; env A=1 python t.py"))
	must.Eq(t, "echo cd", StripCd("echo cd"))
}

// The shim resolves the host through the hosts file and runs the command,
// without horovodrun's cd, on that host's agent.
func TestRun_ThroughAgent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	agentDir := t.TempDir()
	srv := &workeragent.Server{Token: "tok", Dir: agentDir, Env: []string{"PATH=/usr/bin:/bin"}, Logger: hclog.NewNullLogger()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Serve(ctx, l) }()

	hosts := filepath.Join(t.TempDir(), "hosts.json")
	must.NoError(t, os.WriteFile(hosts, []byte(`{"w-1a2b3c4d": "`+l.Addr().String()+`"}`), 0o644))

	inv, err := ParseArgs([]string{"-o", "StrictHostKeyChecking=no", "w-1a2b3c4d", "cd /nonexistent-launcher-dir > /dev/null 2>&1 ; pwd; exit 3"})
	must.NoError(t, err)
	outcomes := filepath.Join(t.TempDir(), "outcomes.jsonl")
	var stdout, stderr strings.Builder
	code := Run(context.Background(), inv, hosts, outcomes, "tok", nil, &stdout, &stderr)
	must.Eq(t, 3, code, must.Sprint(stderr.String()))
	must.Eq(t, agentDir+"\n", stdout.String())

	// Killed by a signal on the worker: its agent or host went.
	killed, err := ParseArgs([]string{"w-1a2b3c4d", "kill -KILL $$"})
	must.NoError(t, err)
	must.Eq(t, 128+9, Run(context.Background(), killed, hosts, outcomes, "tok", nil, &stdout, &stderr))

	inv.Host = "w-unknown"
	stderr.Reset()
	must.Eq(t, ExitConnection, Run(context.Background(), inv, hosts, outcomes, "tok", nil, &stdout, &stderr))
	must.StrContains(t, stderr.String(), "Could not resolve hostname w-unknown")

	// A command that succeeds leaves nothing; one stopped by horovodrun
	// (the shim's context ends) is not the worker's failure.
	ok, err := ParseArgs([]string{"w-1a2b3c4d", "true"})
	must.NoError(t, err)
	must.Eq(t, 0, Run(context.Background(), ok, hosts, outcomes, "tok", nil, &stdout, &stderr))
	stopped, cancelStopped := context.WithCancel(context.Background())
	cancelStopped()
	Run(stopped, inv, hosts, outcomes, "tok", nil, &stdout, &stderr)

	got, err := ReadOutcomes(outcomes)
	must.NoError(t, err)
	must.Len(t, 3, got)
	for i, want := range []struct {
		host  string
		code  int
		cause string
	}{{"w-1a2b3c4d", 3, CauseScript}, {"w-1a2b3c4d", 137, CauseInfrastructure}, {"w-unknown", ExitConnection, CauseInfrastructure}} {
		must.Eq(t, want.host, got[i].Host)
		must.Eq(t, want.code, got[i].Code)
		must.Eq(t, want.cause, got[i].Cause)
	}
}

// Issue 13, row 8, through the shim: horovodrun's remote command, with the
// job's environment on it (`env K=V ... COMMAND`), crosses the network to
// the worker's agent sealed; a recorder in between sees none of it.
func TestRun_HorovodCommandSealedOnTheWire(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	srv := &workeragent.Server{Token: "job-token", Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}, Logger: hclog.NewNullLogger()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Serve(ctx, l) }()

	// A recorder between the shim and the agent.
	rec, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	defer rec.Close()
	var mu sync.Mutex
	var wire bytes.Buffer
	go func() {
		c, err := rec.Accept()
		if err != nil {
			return
		}
		a, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			c.Close()
			return
		}
		copyRecorded := func(dst, src net.Conn) {
			defer dst.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				mu.Lock()
				wire.Write(buf[:n])
				mu.Unlock()
				if _, werr := dst.Write(buf[:n]); werr != nil || err != nil {
					return
				}
			}
		}
		go copyRecorded(a, c)
		copyRecorded(c, a)
	}()

	hosts := filepath.Join(t.TempDir(), "hosts.json")
	must.NoError(t, os.WriteFile(hosts, []byte(`{"w-1a2b3c4d": "`+rec.Addr().String()+`"}`), 0o644))
	inv, err := ParseArgs([]string{"-o", "PasswordAuthentication=no", "-o", "StrictHostKeyChecking=no", "w-1a2b3c4d",
		"cd /launcher > /dev/null 2>&1 ; env HOROVOD_HOSTNAME=w-1a2b3c4d WANDB_API_KEY=s3cret-api-key SCHEDULEARN_REPORT_TOKEN=r3port-token sh -c 'echo \"$WANDB_API_KEY\"'"})
	must.NoError(t, err)
	var stdout, stderr strings.Builder
	must.Eq(t, 0, Run(context.Background(), inv, hosts, "", "job-token", nil, &stdout, &stderr), must.Sprint(stderr.String()))
	must.Eq(t, "s3cret-api-key\n", stdout.String())
	mu.Lock()
	defer mu.Unlock()
	for _, secret := range []string{"s3cret-api-key", "r3port-token", "HOROVOD_HOSTNAME", "job-token"} {
		must.StrNotContains(t, wire.String(), secret)
	}
	must.Positive(t, wire.Len())
}

// Why a worker command failed, from its code and whether its agent
// reported it.
func TestCause(t *testing.T) {
	for _, tc := range []struct {
		name    string
		code    int
		reached bool
		want    string
	}{
		{"the script's own code", 1, true, CauseScript},
		{"killed by a signal", 137, true, CauseInfrastructure},
		{"agent not reached", 1, false, CauseInfrastructure},
		{"stopped by its agent's fence", drain.ExitInfrastructure, true, CauseInfrastructure},
	} {
		t.Run(tc.name, func(t *testing.T) { must.Eq(t, tc.want, Cause(tc.code, tc.reached)) })
	}
}
