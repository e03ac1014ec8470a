# Writes trace.csv: the small two-queue case of docs/sim/README.md
# ("Queues"), 200 rigid Philly-format jobs on queues a and b: Poisson
# arrivals (mean 600 s apart), 1-4 GPUs, 300-3600 s, each queue at random.
# python3 gen.py > trace.csv
import datetime
import random

random.seed(1)
t0 = datetime.datetime(2017, 10, 9)
t = 0.0
print("timestamp,duration,num_gpus,gpu_time,cluster")
for _ in range(200):
    t += random.expovariate(1 / 600.0)
    gpus = random.randint(1, 4)
    secs = float(random.randint(300, 3600))
    vc = random.choice(["a", "b"])
    at = (t0 + datetime.timedelta(seconds=int(t))).strftime("%Y-%m-%d %H:%M:%S")
    print("%s,%.1f,%d,%.1f,%s" % (at, secs, gpus, secs * gpus, vc))
