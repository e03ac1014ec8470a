# The worker agent's standby interpreter (driver/workeragent, Go package
# workeragent: standby.go says what it does), after the port guard
# (driver/pyhooks/ports.py).
import importlib, io, json, os, sys

# The modules to import ahead of the training program: set before this
# program runs (standby.go's standbyScript from its arguments, or the fork
# server's run_standby from the agent's request: driver/forkserver).
modules = globals()["modules"]
for name in modules:
    try:
        importlib.import_module(name)
    except BaseException:
        pass
try:
    os.write(3, b"ready\n")
    os.close(3)
except OSError:
    pass
line = b""
while not line.endswith(b"\n"):
    c = os.read(0, 1)
    if not c:
        sys.exit(0)
    line += c
req = json.loads(line)
os.environ.clear()
os.environ.update(req["env"])
os.chdir(req["dir"])
if os.environ.get("PYTHONUNBUFFERED"):
    sys.stdout.flush()
    sys.stderr.flush()
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "wb", closefd=False), encoding=sys.stdout.encoding, errors=sys.stdout.errors, write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "wb", closefd=False), encoding=sys.stderr.encoding, errors=sys.stderr.errors, write_through=True)
sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
torch = sys.modules.get("torch")
threads = os.environ.get("OMP_NUM_THREADS") or os.environ.get("MKL_NUM_THREADS")
if torch is not None and threads and threads.isdigit() and int(threads) > 0:
    torch.set_num_threads(int(threads))
import runpy
argv = req["argv"]
try:
    with open("/proc/self/comm", "w") as comm:
        comm.write(os.path.basename(argv[1] if argv[0] == "-m" else argv[0])[:15])
except OSError:
    pass
if argv[0] == "-m":
    sys.argv = argv[1:]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
else:
    sys.argv = argv
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    runpy.run_path(argv[0], run_name="__main__")
