package workeragent

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/schedulearn/schedulearn/driver/forkserver"
	"github.com/schedulearn/schedulearn/driver/pyhooks"
)

// standbyScript is the standby interpreter: it imports the modules named in
// its arguments (one that fails to import is skipped: the program will
// fail on it the same way), says so on fd 3, then reads one request line from stdin (argv,
// env, dir; an empty stdin: nothing to run) and runs the program in this
// same process with that environment, directory and argv, as its own
// interpreter would; its process name (/proc/self/comm, what ps -o comm
// and top show) becomes the program's, as its command line stays the
// standby's. Variables read when a module is imported see the
// agent's environment; OMP_NUM_THREADS and MKL_NUM_THREADS, read by torch
// at import, are applied again, and PYTHONUNBUFFERED and
// PYTHONDONTWRITEBYTECODE too. Horovod's services in it bind no port in
// the range the agent's pyhooks.AvoidPortsEnv names (pyhooks.Ports).
var standbyScript = "import sys\nmodules = sys.argv[1:]\n" + standbyBody

// standbyBody is the standby after its start: the fork server's children
// run it too (StandbyProgram), with modules set to those their agent
// asked for (already imported in the server, unless the agent wants more).
var standbyBody = pyhooks.Ports + standbyPy

// StandbyProgram is the program a fork server's children run to be a
// worker agent's standby (forkserver.Server.Program): the standby after
// its imports, with the global modules set to those its agent asked for.
// It reads its request on stdin and says it is ready on fd 3, as the
// standby an agent starts itself.
func StandbyProgram() string { return standbyBody }

// standbyPy (standby.py) is standbyBody after the port guard.
//
//go:embed standby.py
var standbyPy string

// Standby is a Python interpreter started ahead of the first command, with
// the modules the training imports (torch, horovod.torch) already
// imported: a worker that joins a running job starts its training process
// without waiting for those imports (seconds), which Horovod's running
// workers would otherwise wait for at their rendezvous. The agent hands
// the first command that runs Python (the interpreter itself, or a script
// whose #! line names it, like torchrun) to the standby; any other command,
// or one whose environment changes what the interpreter reads at startup,
// runs as usual. A standby serves one command.
//
// With Server set, the standby is forked from the node's warm interpreter
// (forkserver.Server), which imported the modules before this worker existed;
// otherwise, or when the server cannot serve this agent, the agent starts
// its own.
type Standby struct {
	Python  string   // the interpreter
	Modules []string // imported ahead
	Dir     string   // working directory of commands
	Env     []string // environment of commands
	// Server is the fork server's socket (taskfile.Task.StandbyServer), or "".
	Server string
	// Ready, if set, is called once the modules are imported.
	Ready func()

	mu      sync.Mutex
	proc    process
	forked  bool
	forkErr error
	stdin   io.WriteCloser
	out     *switchWriter
	err     *switchWriter
}

// forkTimeout bounds the fork server's answer (it answers at once: the
// driver names it to tasks only once its imports are done).
const forkTimeout = 5 * time.Second

// Start starts the standby interpreter in a process group of its own:
// forked by the server when there is one that serves this agent (Forked),
// else started by the agent (ForkError says why the server did not).
func (s *Standby) Start() error {
	if s.Server != "" {
		err := s.fork()
		s.mu.Lock()
		s.forkErr = err
		s.mu.Unlock()
		if err == nil {
			return nil
		}
	}
	return s.spawn()
}

// Forked says whether the standby came from the fork server.
func (s *Standby) Forked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forked
}

// ForkError is why the fork server did not serve this agent, if it was asked.
func (s *Standby) ForkError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forkErr
}

func (s *Standby) spawn() error {
	cmd := exec.Command(s.Python, append([]string{"-c", standbyScript}, s.Modules...)...)
	cmd.Dir = s.Dir
	cmd.Env = s.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	out, errOut := &switchWriter{}, &switchWriter{}
	cmd.Stdout, cmd.Stderr = out, errOut
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("failed to create stdin pipe: %w", err)
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("failed to create ready pipe: %w", err)
	}
	cmd.ExtraFiles = []*os.File{readyW}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		ready.Close()
		return fmt.Errorf("failed to start standby interpreter: %w", err)
	}
	go s.awaitReady(ready)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc, s.stdin, s.out, s.err = &started{cmd}, stdin, out, errOut
	return nil
}

// fork asks the fork server for the standby: it gets the ends of the
// pipes the agent reads and writes, as a child of the agent would.
func (s *Standby) fork() error {
	for _, kv := range s.Env {
		// The server started without them; the commands expect them.
		if k, _, _ := strings.Cut(kv, "="); forkserver.StartupVar(k) {
			return fmt.Errorf("the agent's environment sets %s", k)
		}
	}
	// Four pipes: the standby's stdin, stdout, stderr and ready. Its ends
	// go to the server (the child has them once it answers, or there is
	// no child); the agent keeps the others.
	var ours, theirs [4]*os.File
	for i := range ours {
		r, w, err := os.Pipe()
		if err != nil {
			closeFiles(ours[:i])
			closeFiles(theirs[:i])
			return fmt.Errorf("failed to create pipe: %w", err)
		}
		ours[i], theirs[i] = r, w
		if i == 0 {
			ours[i], theirs[i] = w, r
		}
	}
	child, err := forkserver.Fork(s.Server, s.Modules, theirs, forkTimeout)
	closeFiles(theirs[:])
	if err != nil {
		closeFiles(ours[:])
		return err
	}
	p := &forked{child: child}
	out, errOut := &switchWriter{}, &switchWriter{}
	for _, c := range []struct {
		w io.Writer
		r *os.File
	}{{out, ours[1]}, {errOut, ours[2]}} {
		p.copies.Add(1)
		go func() {
			defer p.copies.Done()
			defer c.r.Close()
			_, _ = io.Copy(c.w, c.r)
		}()
	}
	go s.awaitReady(ours[3])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc, s.forked, s.stdin, s.out, s.err = p, true, ours[0], out, errOut
	return nil
}

// forked is a standby the fork server forked for this agent, with the
// copies of its stdout and stderr into the agent's pipes.
type forked struct {
	child  *forkserver.Child
	copies sync.WaitGroup // stdout and stderr, read to their end
}

func (p *forked) processID() int { return p.child.Pid() }

// wait returns the standby's exit code as the server tells it (255 when
// it cannot: forkserver.Child.Wait), once its output is copied.
func (p *forked) wait() int {
	code := p.child.Wait()
	// Output held open by children the command left behind is not waited for.
	done := make(chan struct{})
	go func() { p.copies.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	return code
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

func (s *Standby) awaitReady(ready *os.File) {
	defer ready.Close()
	if n, _ := ready.Read(make([]byte, 6)); n > 0 && s.Ready != nil {
		s.Ready()
	}
}

// Take hands command to the standby when it can run it: it returns the
// standby's process, already started and running command with its output
// going to stdout and stderr, and its stdin; nil when the command is
// not for it (or it was taken).
func (s *Standby) Take(command string, stdout, stderr io.Writer) (process, io.WriteCloser) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil, nil
	}
	req, ok := s.request(command)
	if !ok {
		return nil, nil
	}
	line, err := json.Marshal(req)
	if err != nil {
		return nil, nil
	}
	if _, err := s.stdin.Write(append(line, '\n')); err != nil {
		return nil, nil
	}
	s.out.attach(stdout)
	s.err.attach(stderr)
	proc, stdin := s.proc, s.stdin
	s.proc, s.stdin = nil, nil
	return proc, stdin
}

// Cold runs command in an interpreter started for it, without modules
// imported ahead, when it is a command a standby takes (Take): an agent's
// commands after the first (the standby serves one) run as the first did,
// the port guard included. It returns nil when the command is not for a
// standby or the interpreter could not start.
func (s *Standby) Cold(command string, stdout, stderr io.Writer) (process, io.WriteCloser) {
	fresh := &Standby{Python: s.Python, Dir: s.Dir, Env: s.Env}
	if _, ok := fresh.request(command); !ok {
		return nil, nil
	}
	if err := fresh.spawn(); err != nil {
		return nil, nil
	}
	return fresh.Take(command, stdout, stderr)
}

// Stop ends an untaken standby.
func (s *Standby) Stop() {
	s.mu.Lock()
	proc, stdin := s.proc, s.stdin
	s.proc, s.stdin = nil, nil
	s.mu.Unlock()
	if proc == nil {
		return
	}
	stdin.Close()
	_ = syscall.Kill(-proc.processID(), syscall.SIGKILL)
	proc.wait()
}

// standbyRequest is the line the standby reads.
type standbyRequest struct {
	Argv []string          `json:"argv"`
	Env  map[string]string `json:"env"`
	Dir  string            `json:"dir"`
}

// request turns a shell command into the standby's request, if it runs
// s.Python: `[env NAME=VALUE ...] PROGRAM ARGS`, where PROGRAM is the
// interpreter (with a script or -m module, and no other option than -u)
// or a script whose #! line names it.
func (s *Standby) request(command string) (standbyRequest, bool) {
	words, ok := splitWords(command)
	if !ok {
		return standbyRequest{}, false
	}
	env := map[string]string{}
	for _, kv := range s.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	for len(words) > 0 && words[0] == "env" {
		words = words[1:]
		for len(words) > 0 && isAssignment(words[0]) {
			k, v, _ := strings.Cut(words[0], "=")
			env[k] = v
			words = words[1:]
		}
	}
	if len(words) == 0 || !s.startupEnvUnchanged(env) {
		return standbyRequest{}, false
	}
	// The ports to avoid are this host's: horovodrun copies the launcher's
	// environment, from its own host, onto every command line.
	if v, ok := envValue(s.Env, pyhooks.AvoidPortsEnv); ok {
		env[pyhooks.AvoidPortsEnv] = v
	}
	program := lookPath(words[0], env["PATH"])
	if program == "" {
		return standbyRequest{}, false
	}
	args := words[1:]
	if !sameInterpreter(program, s.Python) {
		// A script run by the interpreter (a console script: torchrun).
		if !sameInterpreter(scriptInterpreter(program), s.Python) {
			return standbyRequest{}, false
		}
		return standbyRequest{Argv: append([]string{program}, args...), Env: env, Dir: s.Dir}, true
	}
	for len(args) > 0 && args[0] == "-u" {
		env["PYTHONUNBUFFERED"] = "1"
		args = args[1:]
	}
	switch {
	case len(args) >= 2 && args[0] == "-m":
	case len(args) >= 1 && !strings.HasPrefix(args[0], "-"):
	default:
		return standbyRequest{}, false
	}
	return standbyRequest{Argv: args, Env: env, Dir: s.Dir}, true
}

// envValue is the value of name in env (NAME=VALUE entries).
func envValue(env []string, name string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// startupEnvUnchanged says whether env leaves what the interpreter and the
// dynamic linker read at startup as the standby had it.
func (s *Standby) startupEnvUnchanged(env map[string]string) bool {
	had := map[string]string{}
	for _, kv := range s.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			had[k] = v
		}
	}
	for k, v := range env {
		if forkserver.StartupVar(k) && had[k] != v {
			return false
		}
	}
	for k := range had {
		if _, ok := env[k]; !ok && forkserver.StartupVar(k) {
			return false
		}
	}
	return true
}

// splitWords splits a shell command into its words when it uses only
// plain words, single quotes and double quotes without expansions (as
// horovodrun and the torchrun launcher write them); otherwise false.
func splitWords(command string) ([]string, bool) {
	var words []string
	var b strings.Builder
	inWord := false
	for i := 0; i < len(command); i++ {
		c := command[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, b.String())
				b.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(command[i+1:], '\'')
			if end < 0 {
				return nil, false
			}
			b.WriteString(command[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			end := strings.IndexByte(command[i+1:], '"')
			if end < 0 || strings.ContainsAny(command[i+1:i+1+end], "$`\\!") {
				return nil, false
			}
			b.WriteString(command[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case plainChar(c):
			b.WriteByte(c)
			inWord = true
		default:
			return nil, false
		}
	}
	if inWord {
		words = append(words, b.String())
	}
	return words, len(words) > 0
}

func plainChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_@%+=:,./-", c) >= 0
}

// isAssignment says whether a word is NAME=VALUE, as env takes it.
func isAssignment(w string) bool {
	k, _, ok := strings.Cut(w, "=")
	if !ok || k == "" {
		return false
	}
	for i, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// lookPath finds program as the shell would with path; "" if not found.
func lookPath(program, path string) string {
	if strings.Contains(program, "/") {
		if filepath.IsAbs(program) {
			return program
		}
		return ""
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, program)
		if info, err := os.Stat(p); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// scriptInterpreter is the interpreter a script's #! line names, or "".
func scriptInterpreter(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	line, _, _ := strings.Cut(string(head[:n]), "\n")
	rest, ok := strings.CutPrefix(line, "#!")
	if !ok {
		return ""
	}
	fields := strings.Fields(rest)
	if len(fields) != 1 {
		return ""
	}
	return fields[0]
}

// sameInterpreter says whether a and b are the same interpreter: the same
// file in the same directory (a virtual environment's python and python3,
// but not the system's python its links lead to, which has other
// packages).
func sameInterpreter(a, b string) bool {
	return sameFile(a, b) && sameFile(filepath.Dir(a), filepath.Dir(b))
}

func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	ia, err := os.Stat(a)
	if err != nil {
		return false
	}
	ib, err := os.Stat(b)
	if err != nil {
		return false
	}
	return os.SameFile(ia, ib)
}

// switchWriter holds what is written to it until it is attached to a
// writer, then passes it on.
type switchWriter struct {
	mu  sync.Mutex
	buf []byte
	w   io.Writer
}

// maxHeld bounds what a switchWriter holds before it is attached.
const maxHeld = 64 << 10

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		return s.w.Write(p)
	}
	if len(s.buf)+len(p) > maxHeld {
		return 0, errors.New("standby output held too long")
	}
	s.buf = append(s.buf, p...)
	return len(p), nil
}

func (s *switchWriter) attach(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buf) > 0 {
		_, _ = w.Write(s.buf)
		s.buf = nil
	}
	s.w = w
}
