# The horovod task driver's port guard (driver/pyhooks, Go package pyhooks).
#
# Horovod's services (the launcher's rendezvous and driver services, each
# worker's task and notification services) bind a random port in
# 1024-65535 (horovod.runner.util.network.find_port). That overlaps the
# Nomad client's dynamic port range: a port one of them holds may be the
# one Nomad gives a new worker's agent on that host, which then cannot bind
# it. Guarded, they bind port 0 (the kernel's ephemeral range,
# net.ipv4.ip_local_port_range, disjoint from Nomad's by default) and keep
# a port only outside the range SCHEDULEARN_AVOID_PORTS ("LOW-HIGH") names;
# where the kernel's range lies inside it, a random port outside it.
#
# guard_ports() replaces find_port in Horovod's modules already imported
# and, through an import hook, in those imported later. It is run by the
# launcher's horovodrun bootstrap and by the worker agents' standby
# interpreters, before the training program. Without the variable, or
# without Horovod, it changes nothing.


def guard_ports():
    import os
    import random
    import sys

    env = "SCHEDULEARN_AVOID_PORTS"
    modules = (
        "horovod.runner.util.network",
        "horovod.runner.common.util.network",
        "horovod.runner.http.http_server",
    )

    def avoided():
        low, _, high = os.environ.get(env, "").partition("-")
        try:
            low, high = int(low), int(high)
        except ValueError:
            return None
        if 0 < low <= high <= 65535:
            return low, high
        return None

    def find_port(server_factory):
        avoid = avoided()

        def allowed(port):
            return avoid is None or not avoid[0] <= port <= avoid[1]

        for _ in range(64):
            try:
                server = server_factory(("", 0))
            except Exception:
                break
            port = server.server_address[1]
            if allowed(port):
                return server, port
            server.server_close()
        ports = [p for p in range(1024, 65536) if allowed(p)]
        start = random.randrange(len(ports))
        for i in range(len(ports)):
            port = ports[(start + i) % len(ports)]
            try:
                return server_factory(("", port)), port
            except Exception:
                pass
        raise Exception("Unable to find a port to bind to outside %s." % os.environ.get(env))

    find_port.schedulearn_guard = True

    def patch(module):
        if callable(getattr(module, "find_port", None)):
            module.find_port = find_port

    for name in modules:
        if name in sys.modules:
            patch(sys.modules[name])

    class Loader:
        def __init__(self, loader):
            self.loader = loader

        def create_module(self, spec):
            return self.loader.create_module(spec)

        def exec_module(self, module):
            self.loader.exec_module(module)
            patch(module)

    class Finder:
        schedulearn_guard = True

        def find_spec(self, name, path=None, target=None):
            if name not in modules:
                return None
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = Loader(spec.loader)
                    return spec
            return None

    if not any(getattr(f, "schedulearn_guard", False) for f in sys.meta_path):
        sys.meta_path.insert(0, Finder())


guard_ports()
del guard_ports
