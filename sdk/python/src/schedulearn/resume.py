"""Where a job resumes: the planner's word on a (re)start.

When the planner stops a job to give its GPUs back to another queue, the
job gets SIGTERM first (see :func:`schedulearn.on_sigterm`: save and report
the checkpoint) and is requeued. When it starts again, the planner passes
the last checkpoint the job reported (if it lies in the planner's
``checkpoint_dirs``) and its step in the environment
(``SCHEDULEARN_RESUME_CHECKPOINT``, ``SCHEDULEARN_RESUME_STEP``).

That environment is the one of the launcher's start. A launcher that
lives on (horovodrun, torchrun) starts new workers by itself when every
worker was lost, and they inherit the old answer, or none, though the job
has reported newer checkpoints since. So, where the planner runs the job
(``SCHEDULEARN_ADDR``, ``SCHEDULEARN_JOB_ID`` and a token are set),
:func:`resume` also asks it (``GET /v1/jobs/{id}/resume``, within 3 s) and
takes the newer of the two answers. A planner that cannot be reached, or
answers something unreadable, leaves the environment's answer (one warning
per process). Every worker calls it at its start:

    r = schedulearn.resume()        # None: a first start, or start over
    if r is not None:
        model.load_state_dict(torch.load(r.checkpoint))
        step = r.step
"""

import json
import logging
import os
import threading
import urllib.parse
import urllib.request
from dataclasses import dataclass

from .reporter import _USER_AGENT, ENV_ADDR, ENV_JOB_ID, ENV_REPORT_TOKEN, ENV_TOKEN, TOKEN_HEADER

log = logging.getLogger("schedulearn")

#: The checkpoint's path and its step.
ENV_RESUME_CHECKPOINT = "SCHEDULEARN_RESUME_CHECKPOINT"
ENV_RESUME_STEP = "SCHEDULEARN_RESUME_STEP"

#: On the planner's answer from the record it read last (its store not
#: answering): when that read began.
STALE_AS_OF_HEADER = "X-Schedulearn-Stale-As-Of"

#: How long the planner may take to answer, in seconds.
PLANNER_TIMEOUT = 3.0
# The most of the planner's answer read: a path and a step, well under it.
_MAX_ANSWER = 1 << 16

_warned = False
_warned_lock = threading.Lock()


@dataclass(frozen=True)
class Resume:
    """A checkpoint to resume from, written at ``step``."""

    checkpoint: str
    step: int


def resume(environ=None, *, opener=None, timeout=PLANNER_TIMEOUT):
    """The checkpoint to resume from, or None (then the script starts over).

    The newer (higher step) of the environment's answer
    (``SCHEDULEARN_RESUME_*``) and the planner's (asked where
    ``SCHEDULEARN_ADDR``, ``SCHEDULEARN_JOB_ID`` and
    ``SCHEDULEARN_REPORT_TOKEN``, else ``SCHEDULEARN_TOKEN``, are set), of
    those whose step is a whole number above 0 and whose path is absolute
    and a file here; a newer answer whose file is not here is logged as a
    warning (the job may then go on from an older step, or start over).
    Never raises for the planner's sake: a planner that is down, slow
    (``timeout`` seconds) or answers garbage leaves the environment's
    answer.

    Args:
        environ: the environment to read; default ``os.environ``.
        opener: what opens the request (``opener.open(request,
            timeout=...)``, as ``urllib.request.build_opener()`` returns);
            default one that ignores proxy settings (the planner is reached
            directly).
        timeout: seconds the planner may take.
    """
    env = os.environ if environ is None else environ
    answers = [r for r in (_from_environment(env), _from_planner(env, opener, timeout))
               if r is not None and r.step > 0]
    found = [r for r in answers if _usable(r)]
    # On a tie the environment's: what the planner told this start.
    best = max(found, key=lambda r: r.step) if found else None
    missing = [r for r in answers if not _usable(r) and (best is None or r.step > best.step)]
    if missing:
        # Never silent: the job got further than what resume() answers.
        r = max(missing, key=lambda r: r.step)
        log.warning("schedulearn: the checkpoint of step %d to resume from, %s, is not %s on this host; "
                    "resume() answers %s", r.step, r.checkpoint,
                    "a file" if os.path.isabs(r.checkpoint) else "an absolute path to a file",
                    "no checkpoint" if best is None else "step %d" % best.step)
    return best


def _usable(r):
    return r.step > 0 and os.path.isabs(r.checkpoint) and os.path.isfile(r.checkpoint)


def _from_environment(env):
    try:
        return Resume(env.get(ENV_RESUME_CHECKPOINT, ""), int(env.get(ENV_RESUME_STEP, "")))
    except ValueError:
        return None


class PlannerUnavailable(Exception):
    """The planner could not be asked where the job resumes, or its answer
    could not be read."""


def planner_resume_point(environ=None, *, opener=None, timeout=PLANNER_TIMEOUT):
    """The checkpoint the planner holds now as the job's resume point
    (``GET /v1/jobs/{id}/resume``, from its store): a :class:`Resume` (its
    path as the planner has it, unchecked here), or None when it holds
    none, when the last checkpoint reported lies outside its
    ``checkpoint_dirs`` (a restart does not resume from it), or when the
    job is not run by a planner (``SCHEDULEARN_ADDR``,
    ``SCHEDULEARN_JOB_ID`` or the token unset).

    Raises :class:`PlannerUnavailable` when the planner cannot be asked
    (down, slow: ``timeout`` seconds; cut off; its store not answering) or
    answers something unreadable. A script that deletes old checkpoints asks before it does,
    keeps the one named, and deletes nothing when it cannot ask: a restart
    resumes from what the planner holds, which may be older than the
    checkpoints saved since (the planner away, or cut off from this host,
    while the job saved more).
    """
    env = os.environ if environ is None else environ
    url, token = _resume_url(env)
    if not url:
        return None
    try:
        r, stale = _ask(url, token, opener, timeout)
    except Exception as e:  # down, slow, refused, garbage
        raise PlannerUnavailable("cannot ask the planner at %s where the job resumes: %s" % (url, e)) from e
    if stale:
        raise PlannerUnavailable("the planner at %s answered where the job resumes from the record it read as of "
                                 "%s: its store does not answer" % (url, stale))
    return r


def _resume_url(env):
    """The job's resume URL and token, ("", "") when not run by a planner."""
    addr = env.get(ENV_ADDR, "").strip()
    job_id = env.get(ENV_JOB_ID, "").strip()
    token = (env.get(ENV_REPORT_TOKEN) or env.get(ENV_TOKEN, "")).strip()
    if not (addr and job_id and token):
        return "", ""
    if "://" not in addr:
        addr = "http://" + addr
    return addr.rstrip("/") + "/v1/jobs/" + urllib.parse.quote(job_id, safe="") + "/resume", token


def _ask(url, token, opener, timeout):
    """The planner's answer and, when it answered from the record it read
    last (its store not answering), as of when ("" otherwise)."""
    req = urllib.request.Request(url, method="GET")
    req.add_header("User-Agent", _USER_AGENT)
    req.add_header(TOKEN_HEADER, token)
    if opener is None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=timeout) as resp:
        body = resp.read(_MAX_ANSWER + 1)
        headers = getattr(resp, "headers", None)
        stale = (headers.get(STALE_AS_OF_HEADER) or "") if headers is not None else ""
    return _parse(body), stale


def _from_planner(env, opener, timeout):
    url, token = _resume_url(env)
    if not url:
        return None
    try:
        return _ask(url, token, opener, timeout)[0]  # as of the record read last, if so: the best there is
    except Exception as e:  # down, slow, refused, garbage: the environment's
        _warn_once("schedulearn: cannot ask the planner at %s where to resume (%s); "
                   "using the environment's checkpoint, if any", url, e)
        return None


def _parse(body):
    """The planner's answer, None when it has no checkpoint; raises
    ValueError when it is not one."""
    if len(body) > _MAX_ANSWER:
        raise ValueError("an answer over %d bytes" % _MAX_ANSWER)
    doc = json.loads(body)
    if not isinstance(doc, dict):
        raise ValueError("the answer is not a JSON object")
    path, step = doc.get("checkpoint"), doc.get("step")
    if not isinstance(path, str) or isinstance(step, bool) or not isinstance(step, int):
        raise ValueError("checkpoint must be a string and step an integer")
    if not path:
        return None
    return Resume(path, step)


def _warn_once(fmt, *args):
    global _warned
    with _warned_lock:
        if _warned:
            log.debug(fmt, *args)
            return
        _warned = True
    log.warning(fmt, *args)
