package pyhooks_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/driver/pyhooks"
)

// fakeElastic is the shape of Horovod 0.28's elastic driver that the
// re-notifier reads: the host manager's hosts, the workers' assignment,
// the assignment the hosts would get, and the notice.
var fakeElastic = map[string]string{
	"horovod/__init__.py":                "",
	"horovod/runner/__init__.py":         "",
	"horovod/runner/elastic/__init__.py": "",
	"horovod/runner/elastic/worker.py": `from enum import IntFlag
class HostUpdateResult(IntFlag):
    no_update = 0
    removed = 1
    added = 2
    mixed = removed | added
`,
	"horovod/runner/elastic/driver.py": `import threading
class Hosts:
    def __init__(self, names): self.names = names
    def count_available_slots(self): return len(self.names)
class HostManager:
    def __init__(self, names): self.current_hosts = Hosts(names)
class ElasticDriver:
    def __init__(self, hosts, assigned):
        self._host_manager = HostManager(hosts)
        self._host_assignments = {h: [h] for h in assigned}
        self._min_num_proc = 1
        self._wait_hosts_cond = threading.Condition()
        self._shutdown = threading.Event()
        self.notices = []
    @property
    def host_assignments(self): return self._host_assignments
    def _get_host_assignments(self, current_hosts):
        return {h: [h] for h in current_hosts.names}, []
    def _notify_workers_host_changes(self, current_hosts, update_res):
        self.notices.append(int(update_res))
`,
}

// probeRenotify runs two drivers for 1.5 s with the re-notifier's period
// and bound shortened: one whose workers train on every host it knows,
// one whose new host the workers were never told of. It prints the
// notices each sent.
const probeRenotify = `import os, time
exec(os.environ["HOOK"])
from horovod.runner.elastic.driver import ElasticDriver
settled = ElasticDriver(["a", "b"], ["a", "b"])
stuck = ElasticDriver(["a", "b", "c"], ["a", "b"])
time.sleep(1.5)
settled._shutdown.set(); stuck._shutdown.set()
print(len(settled.notices), len(stuck.notices), sorted(set(stuck.notices)))
`

// A host the workers were not told of is told again, as an addition, once
// the assignment has differed for the bound, and again each bound after;
// a driver whose workers train on every host it knows sends nothing.
func TestRenotify_TellsWorkersAgainOfAnAddedHost(t *testing.T) {
	python, dir := pythonWith(t, fakeElastic)
	hook := strings.Replace(pyhooks.Renotify, "\nrenotify_host_changes()\n", "\nrenotify_host_changes(0.05, 0.3)\n", 1)
	must.NotEq(t, pyhooks.Renotify, hook, must.Sprint("the hook's call to shorten"))
	cmd := exec.Command(python, "-c", probeRenotify)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "HOOK="+hook)
	out, err := cmd.CombinedOutput()
	must.NoError(t, err, must.Sprintf("probe: %s", out))
	fields := strings.Fields(string(out))
	must.Eq(t, "0", fields[0], must.Sprintf("the settled driver sent notices: %s", out))
	must.NotEq(t, "0", fields[1], must.Sprintf("the stuck driver sent none: %s", out))
	must.StrContains(t, string(out), "[2]", must.Sprint("as an addition (HostUpdateResult.added)"))
}
