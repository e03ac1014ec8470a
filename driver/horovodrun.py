# The launcher's horovodrun bootstrap (driver, Go package driver:
# taskplan.go's horovodrunBootstrap says what it changes and why), after the
# port guard and the re-notifier (driver/pyhooks). Run as
# "python3 -c <this> DISCOVER_SECS HOROVODRUN ARGS...".
import multiprocessing, os, subprocess, sys
import horovod.runner.elastic.driver as elastic_driver
import horovod.runner.elastic.discovery as elastic_discovery
import horovod.runner.common.util.safe_shell_exec as safe_shell_exec
if hasattr(elastic_driver, "DISCOVER_HOSTS_FREQUENCY_SECS"):
    elastic_driver.DISCOVER_HOSTS_FREQUENCY_SECS = float(sys.argv[1])
def _execute_discovery_script(self):
    done = subprocess.run(self._discovery_script, shell=True, stdout=subprocess.PIPE)
    if done.returncode != 0:
        raise RuntimeError("Failed to execute discovery script: {}. Exit code: {}".format(self._discovery_script, done.returncode))
    return done.stdout.decode("utf-8", "replace")
if hasattr(elastic_discovery.HostDiscoveryScript, "_execute_discovery_script"):
    elastic_discovery.HostDiscoveryScript._execute_discovery_script = _execute_discovery_script
class _Multiprocessing:
    def __getattr__(self, name):
        return getattr(multiprocessing, name)
    def get_context(self, method=None):
        return multiprocessing.get_context("forkserver" if method == "spawn" else method)
if getattr(safe_shell_exec, "multiprocessing", None) is multiprocessing and "forkserver" in multiprocessing.get_all_start_methods():
    multiprocessing.set_forkserver_preload([safe_shell_exec.__name__])
    safe_shell_exec.multiprocessing = _Multiprocessing()
import logging
logging.basicConfig(level=logging.INFO, format="%(asctime)s horovodrun: %(message)s")
sys.path[0] = os.path.dirname(sys.argv[2])
sys.argv = [sys.argv[2]] + sys.argv[3:]
from horovod.runner.launch import run_commandline
sys.exit(run_commandline())
