"""A fake planner: an HTTP server in a thread that records progress reports
and answers with scripted status codes, and scripted bodies (advice) when
it takes them; and answers GETs (the resume point) with a scripted status
and body."""

import http.server
import json
import socket
import threading
import time

import pytest

import schedulearn


class FakePlanner:
    def __init__(self, port=0):
        self.requests = []  # (path, headers, body)
        self.codes = []  # status codes for the next requests; then 204
        # Bodies of the replies to the next reports taken: a dict (sent as
        # JSON) or bytes (as they are) with 200, None for a 204; then 204.
        self.replies = []
        # The answer to every GET: a status, a body (a dict, sent as JSON,
        # or bytes, as they are) and optionally headers (a dict); the GETs
        # asked, (path, headers).
        self.get_answer = (200, {"checkpoint": "", "step": 0})
        self.gets = []
        # Called at each GET before it is answered, when set.
        self.on_get = None
        # How many of the next reports are recorded and answered 503 (the
        # answer lost after the planner recorded them), before codes.
        self.lose = 0
        self.lock = threading.Lock()
        planner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                out = None
                with planner.lock:
                    if planner.lose > 0:
                        planner.lose -= 1
                        planner.requests.append((self.path, dict(self.headers), json.loads(body)))
                        code = 503
                    else:
                        code = planner.codes.pop(0) if planner.codes else 204
                    if code == 204:
                        planner.requests.append((self.path, dict(self.headers), json.loads(body)))
                        out = planner.replies.pop(0) if planner.replies else None
                        if out is not None:
                            code = 200
                if code == 204:
                    self.send_response(204)
                    self.end_headers()
                    return
                if code != 200:
                    out = {"error": "scripted %d" % code}
                if not isinstance(out, bytes):
                    out = json.dumps(out).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_GET(self):
                if planner.on_get is not None:
                    planner.on_get()
                with planner.lock:
                    planner.gets.append((self.path, dict(self.headers)))
                    code, out, *extra = planner.get_answer
                if not isinstance(out, bytes):
                    out = json.dumps(out).encode()
                self.send_response(code)
                for k, v in (extra[0] if extra else {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.addr = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def reports(self):
        with self.lock:
            return [r for _, _, body in self.requests for r in body]

    def batches(self):
        with self.lock:
            return [body for _, _, body in self.requests]

    def wait_for(self, n, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.reports()) >= n:
                return True
            time.sleep(0.01)
        return False

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def planner():
    p = FakePlanner()
    yield p
    p.stop()


def free_port():
    """A port nobody listens on (nothing guarantees nobody will later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def clean_env(monkeypatch):
    for k in (schedulearn.ENV_ADDR, schedulearn.ENV_JOB_ID, schedulearn.ENV_REPORT_TOKEN,
              schedulearn.ENV_TOKEN, schedulearn.ENV_TARGET_METRIC, "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


@pytest.fixture
def reporters():
    """Reporters made through it are closed (quickly) after the test."""
    made = []

    def make(*args, cls=schedulearn.Reporter, **kwargs):
        r = cls(*args, **kwargs)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close(timeout=0.1)
