"""Progress reporting to the Schedulearn planner.

A :class:`Reporter` never blocks and never raises into the training loop:
:meth:`Reporter.report` puts the report in a bounded in-memory queue and
returns (microseconds); a daemon thread sends the queue to the planner's
``POST /v1/jobs/{id}/progress`` in batches, every ``interval`` seconds or as
soon as ``batch_size`` reports wait. When the planner cannot be reached (it
restarts, a leader changes, the network blips, it answers 5xx) the reports
stay queued and the thread retries with exponential backoff; beyond
``max_pending`` reports the oldest are dropped, so memory stays bounded
however long the planner is away.

Where the planner runs the job, it puts the address, the job's ID and the
job's report token in the environment (``SCHEDULEARN_ADDR``,
``SCHEDULEARN_JOB_ID``, ``SCHEDULEARN_REPORT_TOKEN``). Without an address or
a job ID the reporter does nothing at all (no thread, no network), so the
same training script runs unchanged outside the planner.
"""

import atexit
import collections
import datetime
import itertools
import json
import logging
import math
import operator
import os
import random
import threading
import time
import unicodedata
import urllib.error
import urllib.parse
import urllib.request
import weakref

__all__ = ["Reporter", "BatchAdvice", "ENV_ADDR", "ENV_JOB_ID", "ENV_REPORT_TOKEN", "ENV_TOKEN", "ENV_TARGET_METRIC",
           "TOKEN_HEADER"]

log = logging.getLogger("schedulearn")

#: The planner's API (http://host:port).
ENV_ADDR = "SCHEDULEARN_ADDR"
#: The job's ID in the planner.
ENV_JOB_ID = "SCHEDULEARN_JOB_ID"
#: The job's report token: good for this job's progress only.
ENV_REPORT_TOKEN = "SCHEDULEARN_REPORT_TOKEN"
#: The planner's own token (the CLI's); used when there is no report token.
ENV_TOKEN = "SCHEDULEARN_TOKEN"
#: The metric the jobspec's target names; the default metric name.
ENV_TARGET_METRIC = "SCHEDULEARN_TARGET_METRIC"
#: The header that carries the token.
TOKEN_HEADER = "X-Schedulearn-Token"

_USER_AGENT = "schedulearn-python-sdk/0.1"

# Answers after which the same batch is worth sending again: the planner is
# busy, starting, not the leader, or lost a write race.
_RETRY_CODES = frozenset({408, 409, 425, 429})
# Answers after which no report of this job will ever be taken: no such
# job, or the token is not (or no longer) good for it.
_FATAL_CODES = frozenset({401, 403, 404})

# The largest batch (global, samples per optimizer step) and noise scale a
# report or an advice may carry; beyond them a value is taken for garbage.
MAX_BATCH = 2 ** 24
MAX_NOISE_SCALE = 1e12
# The planner's bounds on a throughput other than 0 (samples a second).
MIN_SAMPLES_PER_SEC = 1e-6
MAX_SAMPLES_PER_SEC = 1e12
# The planner's bound on the size of a loss or a metric's value.
MAX_VALUE = 1e30
# Unicode's bidirectional formatting characters: with the control
# characters, what the planner refuses in a metric's name (they would act
# on the terminals that print it).
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# The most of a reply's body read: an advice is a few hundred bytes.
_MAX_REPLY = 1 << 16

# Live reporters, flushed at exit and silenced in forked children.
_live = weakref.WeakSet()
_live_lock = threading.Lock()


def _close_all_at_exit():
    for r in list(_live):
        try:
            r.close(timeout=r.exit_timeout)
        except Exception:  # never fail an exiting program
            pass


def _after_fork_in_child():
    # The sender thread does not survive a fork; a forked child (a data
    # loader worker) must not report in its parent's name anyway.
    for r in list(_live):
        r._enabled = False
        r._closed = True
        r._pending.clear()
    _live.clear()


atexit.register(_close_all_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _finite(x):
    """x as a float, or None if it is missing or not a finite number."""
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _terminal_safe(s):
    """Whether s holds no control (C0, DEL, C1) or bidirectional
    formatting character."""
    return not any(c in _BIDI or unicodedata.category(c) == "Cc" for c in s)


def _count(x, most=MAX_BATCH):
    """x as an int in [1, most], or None: a bool, a string, a fraction or
    anything else is not a count. Takes ints of any kind (numpy's, an int
    tensor's) and whole floats."""
    if x is None or isinstance(x, (bool, str, bytes)):
        return None
    try:
        n = operator.index(x)
    except TypeError:
        f = _finite(x)
        if f is None or not f.is_integer():
            return None
        n = int(f)
    return n if 1 <= n <= most else None


class BatchAdvice(collections.namedtuple("BatchAdvice", "size per_gpu accumulation gpus efficiency "
                                                        "noise_scale goodput_gain exploring",
                                             defaults=(False,))):
    """The planner's advice on the batch: train at the global batch
    ``size`` = ``gpus`` x ``per_gpu`` x ``accumulation`` (micro-batches of
    ``per_gpu`` samples on each GPU, an optimizer step every
    ``accumulation`` micro-batches) while the job has ``gpus`` GPUs.
    ``efficiency`` (the statistical efficiency of ``size`` relative to the
    jobspec's batch size), ``noise_scale`` (the planner's estimate) and
    ``goodput_gain`` are informational, None when the planner left them
    out. ``exploring`` advice measures a second per-GPU batch before the
    planner can fit the job's step time (follow it like any other)."""

    __slots__ = ()

    @classmethod
    def parse(cls, body):
        """The advice in a reply's JSON body (bytes), None when it has none
        (no ``batch`` key); raises ValueError when it is malformed or
        inconsistent. Unknown keys are ignored."""
        doc = json.loads(body)
        if not isinstance(doc, dict):
            raise ValueError("the reply is not a JSON object")
        b = doc.get("batch")
        if b is None:
            return None
        if not isinstance(b, dict):
            raise ValueError("batch is not an object")
        size, per_gpu, accumulation, gpus = (_strict_count(b.get(k)) for k in
                                             ("size", "per_gpu", "accumulation", "gpus"))
        if None in (size, per_gpu, accumulation, gpus):
            raise ValueError("size, per_gpu, accumulation and gpus must be integers in [1, %d]" % MAX_BATCH)
        if size != gpus * per_gpu * accumulation:
            raise ValueError("size %d != gpus %d x per_gpu %d x accumulation %d" %
                             (size, gpus, per_gpu, accumulation))
        return cls(size, per_gpu, accumulation, gpus, *(_info(b.get(k)) for k in
                                                        ("efficiency", "noise_scale", "goodput_gain")),
                   b.get("exploring") is True)


def _strict_count(x):
    # JSON integers only: 512.0 or "512" from the planner is a bug to see.
    return _count(x) if isinstance(x, int) else None


def _info(x):
    # An informational number: a finite float >= 0, else None.
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    f = _finite(x)
    return f if f is not None and 0 <= f <= MAX_NOISE_SCALE else None


def _rfc3339(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat()


class Reporter:
    """Reports a training job's progress to the planner, in the background.

    Args:
        addr: the planner's API, ``http://host:port`` (``host:port`` will
            do); default ``$SCHEDULEARN_ADDR``.
        job_id: the job's ID; default ``$SCHEDULEARN_JOB_ID``.
        token: the job's report token; default ``$SCHEDULEARN_REPORT_TOKEN``,
            else ``$SCHEDULEARN_TOKEN``.
        interval: seconds between sends while reports trickle in.
        batch_size: the most reports per request; a full batch is sent at
            once.
        max_pending: the most reports kept while the planner cannot be
            reached; beyond it the oldest are dropped (and counted in
            :attr:`dropped`).
        timeout: seconds one request may take.
        max_backoff: the longest wait between retries while the planner
            cannot be reached.
        exit_timeout: how long the interpreter's exit waits for the last
            reports to go out (:meth:`close` at exit).
        metric_name: the name of a metric reported as ``value=`` alone;
            default ``$SCHEDULEARN_TARGET_METRIC`` (the jobspec's target
            metric), else ``"metric"``.
        enabled: False makes the reporter do nothing, like a missing
            address (e.g. on ranks other than 0).

    The reporter is a no-op (:attr:`enabled` is False) when it has no
    address or no job ID.
    """

    def __init__(self, addr=None, job_id=None, token=None, *, interval=5.0, batch_size=50,
                 max_pending=1000, timeout=5.0, max_backoff=60.0, exit_timeout=2.0,
                 metric_name=None, enabled=True):
        env = os.environ
        addr = (env.get(ENV_ADDR, "") if addr is None else addr).strip()
        job_id = (env.get(ENV_JOB_ID, "") if job_id is None else job_id).strip()
        if token is None:
            token = env.get(ENV_REPORT_TOKEN) or env.get(ENV_TOKEN, "")
        self.job_id = job_id
        self.interval = float(interval)
        self.batch_size = max(1, int(batch_size))
        self.max_pending = max(1, int(max_pending))
        self.timeout = float(timeout)
        self.max_backoff = float(max_backoff)
        self.exit_timeout = float(exit_timeout)
        self.metric_name = metric_name or env.get(ENV_TARGET_METRIC) or "metric"
        self._token = token.strip()

        #: Reports the planner took.
        self.sent = 0
        #: Reports dropped: over ``max_pending`` while the planner was away,
        #: or refused by it.
        self.dropped = 0
        #: The last step reported (None before the first report).
        self.last_step = None

        # Reentrant: a signal handler (on_sigterm) may report and flush
        # while the main thread it interrupted is inside report().
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)  # the queue shrank
        self._wake = threading.Event()
        self._pending = collections.deque()  # (seq, timestamp, report dict)
        self._in_flight = []  # the batch being sent, until its answer
        self._seq = 0
        self._flushing = 0
        self._closing = False
        self._closed = False
        self._warned = set()
        self._thread = None
        self._url = ""
        # The planner's last good advice, replaced whole by the sender
        # thread (one reference assignment: a reader never sees half of
        # one).
        self._advice = None

        self._enabled = bool(enabled and addr and job_id)
        if not self._enabled:
            return
        if "://" not in addr:
            addr = "http://" + addr
        self._url = addr.rstrip("/") + "/v1/jobs/" + urllib.parse.quote(job_id, safe="") + "/progress"
        # The planner is reached directly: a cluster's HTTP proxy settings
        # are for the outside world.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self._thread = threading.Thread(target=self._run, name="schedulearn-reporter", daemon=True)
        self._thread.start()
        with _live_lock:
            _live.add(self)

    @property
    def enabled(self):
        """Whether reports go anywhere (False: no address or job ID, closed,
        or the planner refused the job for good)."""
        return self._enabled and not self._closed

    @property
    def url(self):
        """Where reports go ("" when disabled)."""
        return self._url

    def unconfirmed_checkpoints(self):
        """The checkpoints (paths) of this reporter's reports queued or
        being sent (a batch whose answer is lost stays queued, and is sent
        again): the planner may yet record one of them as the job's resume
        point. A script that deletes old checkpoints keeps these, and the
        one the planner holds now (:func:`schedulearn.planner_resume_point`,
        asked after this is read).
        """
        with self._lock:
            seen = set()
            out = []
            for seq, _, r in itertools.chain(self._in_flight, self._pending):
                if "checkpoint" in r and seq not in seen:
                    seen.add(seq)
                    out.append(r["checkpoint"])
            return out

    def pending(self):
        """How many reports wait to be sent."""
        with self._lock:
            return len(self._pending)

    @property
    def batch_advice(self):
        """The planner's last advice on the batch (a :class:`BatchAdvice`),
        or None until it gives one. It comes in the replies to reports, so
        only a reporter that sends has it (rank 0), and it stays until the
        next advice replaces it."""
        return self._advice

    def batch_for(self, world_size, default):
        """``(size, per_gpu, accumulation)`` of the planner's advice when it
        was made for ``world_size`` GPUs, else ``default`` (during a resize
        the advice may still be for the old size). Never raises."""
        advice = self._advice
        try:
            if advice is not None and advice.gpus == int(world_size):
                return advice.size, advice.per_gpu, advice.accumulation
        except (TypeError, ValueError):
            pass
        return default

    def report(self, step, samples_per_sec=None, loss=None, metric=None, value=None,
               world_size=None, checkpoint=None, batch=None, noise_scale=None):
        """Queues one report and returns at once; never raises.

        Args:
            step: the training step (an int >= 0).
            samples_per_sec: the job's throughput, all workers together.
            loss: the training loss.
            metric, value: a quality measure, e.g. ``metric="accuracy",
                value=0.91``; ``value`` alone uses :attr:`metric_name`.
            world_size: the number of training processes now.
            checkpoint: the path of a checkpoint written at this step.
            batch: the global batch size the job trains at now (samples
                per optimizer step, all workers together; sent as
                ``batch_size``).
            noise_scale: the gradient noise scale in samples (see
                :class:`schedulearn.NoiseScale`).

        Values that are not what they should be are left out of the
        report. Pass Python numbers (``loss.item()``): a tensor is
        converted here, which waits for the GPU.
        """
        if not self._enabled or self._closing:
            return
        try:
            r = self._make(step, samples_per_sec, loss, metric, value, world_size, checkpoint, batch,
                           noise_scale)
            if r is None:
                return
            with self._lock:
                self._seq += 1
                self._pending.append((self._seq, time.time(), r))
                if len(self._pending) > self.max_pending:
                    self._pending.popleft()
                    self.dropped += 1
                full = len(self._pending) >= self.batch_size
            if full:
                self._wake.set()
        except Exception:  # never into the training loop
            log.debug("schedulearn: failed to queue a progress report", exc_info=True)

    def _make(self, step, samples_per_sec, loss, metric, value, world_size, checkpoint, batch, noise_scale):
        try:
            step = int(step)
        except (TypeError, ValueError):
            self._warn_once("step", "schedulearn: step %r is not an integer; report dropped", step)
            return None
        if step < 0:
            self._warn_once("step", "schedulearn: negative step %d; report dropped", step)
            return None
        self.last_step = step
        r = {"step": step}
        sps = _finite(samples_per_sec)
        if sps is not None and (sps == 0 or MIN_SAMPLES_PER_SEC <= sps <= MAX_SAMPLES_PER_SEC):
            r["samples_per_sec"] = sps
        loss = _finite(loss)
        if loss is not None and abs(loss) <= MAX_VALUE:
            r["loss"] = loss
        v = _finite(value)
        if v is not None and abs(v) <= MAX_VALUE:
            name = str(metric) if metric else self.metric_name
            if _terminal_safe(name):
                r["metric"] = {"name": name[:128], "value": v}
            else:
                self._warn_once("metric", "schedulearn: metric name %r holds a control or bidirectional "
                                "formatting character, which the planner refuses; metric left out", name)
        if world_size is not None:
            try:
                ws = int(world_size)
            except (TypeError, ValueError):
                ws = 0
            if ws > 0:
                r["world_size"] = ws
        if checkpoint:
            r["checkpoint"] = os.fspath(checkpoint)[:4096]
        b = _count(batch)
        if b is not None:
            r["batch_size"] = b
        ns = _finite(noise_scale)
        if ns is not None and 0 <= ns <= MAX_NOISE_SCALE:
            r["noise_scale"] = ns
        return r

    def flush(self, timeout=5.0):
        """Sends what is queued now; returns True once the queue is empty,
        False if ``timeout`` seconds pass first (the reports stay queued)."""
        if not self._enabled:
            return True
        deadline = time.monotonic() + timeout
        with self._lock:
            self._flushing += 1
        try:
            self._wake.set()
            with self._changed:
                while self._pending and self._enabled:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._changed.wait(min(left, 0.5))
                return True
        finally:
            with self._lock:
                self._flushing -= 1

    def close(self, timeout=5.0):
        """Flushes for at most ``timeout`` seconds, then stops the sender;
        later reports are ignored. Returns whether everything went out.
        Called at the interpreter's exit with ``exit_timeout``."""
        if self._closed:
            return not self._pending
        self._closing = True
        ok = self.flush(timeout)
        self._closed = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=min(1.0, self.timeout))
        with _live_lock:
            _live.discard(self)
        return ok

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ------------------------------------------------------------ sender

    def _run(self):
        failures = 0  # failed attempts in a row
        backoff = 0.0  # the wait after the last failure
        last_attempt = 0.0
        delay = self.interval
        while True:
            self._wake.wait(delay)
            self._wake.clear()
            with self._lock:
                urgent = self._flushing > 0 or self._closing
                n = len(self._pending)
            if self._closed or not self._enabled:
                return
            if n == 0:
                delay = self.interval
                continue
            if failures:
                # Backing off: a flush or close shortens the wait, but
                # never below a quarter second between attempts.
                earliest = last_attempt + (min(backoff, 0.25) if urgent else backoff)
                now = time.monotonic()
                if now < earliest:
                    delay = earliest - now
                    continue
            with self._lock:
                batch = list(itertools.islice(self._pending, self.batch_size))
                # Its reports may leave the queue meanwhile (max_pending)
                # and still be recorded: unconfirmed until the answer.
                self._in_flight = batch
            last_attempt = time.monotonic()
            outcome = self._send(batch)
            with self._changed:
                self._in_flight = []
                if outcome != "retry":
                    last = batch[-1][0]
                    while self._pending and self._pending[0][0] <= last:
                        self._pending.popleft()
                    if outcome == "ok":
                        self.sent += len(batch)
                    else:
                        self.dropped += len(batch)
                if outcome == "fatal":
                    self.dropped += len(self._pending)
                    self._pending.clear()
                    self._enabled = False
                left = len(self._pending)
                self._changed.notify_all()
            if outcome == "fatal":
                return
            if outcome == "retry":
                failures += 1
                backoff = failures_backoff(failures, self.max_backoff)
                delay = min(backoff, 0.25) if urgent else backoff
                continue
            if failures:
                log.info("schedulearn: the planner at %s takes reports again", self._url)
                self._warned.discard("streak")
            failures = 0
            delay = 0 if left >= self.batch_size or (urgent and left) else self.interval

    def _send(self, batch):
        """POSTs one batch: "ok", "retry" (keep it), "drop" (the planner
        refused it) or "fatal" (it will refuse every report of this job)."""
        body = json.dumps([dict(r, time=_rfc3339(ts)) for _, ts, r in batch], allow_nan=False).encode()
        req = urllib.request.Request(self._url, data=body, method="POST")
        req.add_header("Content-Type", "application/json")
        req.add_header("User-Agent", _USER_AGENT)
        if self._token:
            req.add_header(TOKEN_HEADER, self._token)
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                reply = resp.read(_MAX_REPLY)
                if resp.status == 200 and reply:
                    self._take_advice(reply)
            return "ok"
        except urllib.error.HTTPError as e:
            code, msg = e.code, _error_message(e)
            if code >= 500 or code in _RETRY_CODES:
                self._warn_streak("the planner at %s answered %d (%s); keeping %d reports and retrying",
                                  self._url, code, msg, self.pending())
                return "retry"
            if code in _FATAL_CODES:
                log.warning("schedulearn: the planner refuses this job's reports (%d: %s); reporting stops", code, msg)
                return "fatal"
            log.warning("schedulearn: the planner refused %d reports (%d: %s); dropped", len(batch), code, msg)
            return "drop"
        except Exception as e:  # URLError, timeouts, resets, bad status lines
            self._warn_streak("cannot reach the planner at %s (%s); keeping %d reports and retrying",
                              self._url, e, self.pending())
            return "retry"

    def _take_advice(self, reply):
        # A reply the SDK cannot read must not stop reports: the batch went
        # through; the last good advice stays.
        try:
            advice = BatchAdvice.parse(reply)
        except Exception as e:
            log.debug("schedulearn: ignored the planner's advice in %r: %s", reply[:200], e)
            return
        if advice is not None and advice != self._advice:
            log.info("schedulearn: the planner advises a batch of %d (%d GPUs x %d x %d steps)",
                     advice.size, advice.gpus, advice.per_gpu, advice.accumulation)
            self._advice = advice

    def _warn_streak(self, fmt, *args):
        # One warning per outage, not one per retry.
        if "streak" not in self._warned:
            self._warned.add("streak")
            log.warning("schedulearn: " + fmt, *args)
        else:
            log.debug("schedulearn: " + fmt, *args)

    def _warn_once(self, key, fmt, *args):
        if key not in self._warned:
            self._warned.add(key)
            log.warning(fmt, *args)


def failures_backoff(failures, cap):
    """Seconds to wait after the n-th failure in a row: 0.5, 1, 2, ... up
    to cap, with +-20% jitter so that many jobs do not retry in step."""
    base = min(cap, 0.5 * (2 ** min(failures - 1, 16)))
    return base * random.uniform(0.8, 1.2)


def _error_message(e):
    try:
        raw = e.read(4096)
        return json.loads(raw).get("error") or e.reason
    except Exception:
        return getattr(e, "reason", "") or ""
