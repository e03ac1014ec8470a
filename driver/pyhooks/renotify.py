# The horovod task driver's host-change re-notifier (driver/pyhooks, Go
# package pyhooks), run in horovodrun's interpreter.
#
# Horovod's elastic driver tells the running workers that hosts were added
# or removed only when discovery's answer changes, and only if it can
# reach the coordinator (rank 0's notification service) at that moment.
# During a reset the new rank 0 has not registered its service yet, and
# the notice is dropped (horovod 0.28: "no coordinator client, skipping
# notifications"); discovery's answer does not change again, so a worker
# added then waits, its GPUs idle, until some other host comes or goes. A
# job held 4 GPUs and trained at world size 3 for minutes.
#
# With the re-notifier, every ElasticDriver watches its own state: when
# the hosts it knows would be assigned otherwise than the workers train
# now, for longer than a reset takes, it sends the notice again, through
# the driver's own method (which still skips it when nothing changed).


def renotify_host_changes(period=2.0, after=10.0):
    import threading
    import time

    try:
        import horovod.runner.elastic.driver as elastic_driver
        from horovod.runner.elastic.worker import HostUpdateResult
    except Exception:
        return
    cls = getattr(elastic_driver, "ElasticDriver", None)
    needed = ("_notify_workers_host_changes", "_get_host_assignments", "host_assignments")
    if cls is None or getattr(cls, "schedulearn_renotify", False) or not all(hasattr(cls, n) for n in needed):
        return

    def change(want, have):
        res = HostUpdateResult.no_update
        if set(want) - set(have):
            res |= HostUpdateResult.added
        if set(have) - set(want):
            res |= HostUpdateResult.removed
        return res or HostUpdateResult.mixed

    def differs(driver):
        hosts = driver._host_manager.current_hosts
        if hosts.count_available_slots() < driver._min_num_proc:
            return None
        want, _ = driver._get_host_assignments(hosts)
        have = driver.host_assignments
        if not have or want == have:
            return None
        return hosts, change(want, have)

    def watch(driver):
        pending = None
        while not driver._shutdown.wait(period):
            with driver._wait_hosts_cond:
                try:
                    found = differs(driver)
                except Exception:
                    found = None
                if found is None:
                    pending = None
                    continue
                now = time.monotonic()
                if pending is None:
                    pending = now
                elif now - pending >= after:
                    try:
                        driver._notify_workers_host_changes(*found)
                    except Exception:
                        pass
                    pending = now

    init = cls.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        threading.Thread(target=watch, args=(self,), name="schedulearn-renotify", daemon=True).start()

    cls.__init__ = __init__
    cls.schedulearn_renotify = True


renotify_host_changes()
del renotify_host_changes
