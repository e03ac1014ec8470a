#!/usr/bin/env python3
"""Reference values of Pollux's simulator interpolation for placements that
placements.csv did not measure (petuum/adaptdl, branch osdi21-artifact,
simulator/applications.py, Application.get_throughput): scipy's
LinearNDInterpolator over (num_nodes, num_replicas, local_bsz) ->
(step_time, sync_time), the points being placements.csv averaged by
(num_nodes, num_replicas, local_bsz) followed by scalability.csv's rows.

A measuring tool for sim/delaunay.go (its test fixtures come from here);
nothing in the repository runs it. Needs numpy, pandas and scipy.

  pollux_interp_reference.py APPS_DIR [APP ...] > reference.csv

prints app,num_nodes,num_replicas,local_bsz,step_time,sync_time for
num_nodes 1..16, num_replicas num_nodes..4*num_nodes and integer local
batch sizes from the smallest to the largest of the app's measurements
(all of them up to 1,100 values, else about 1,100 spread geometrically
plus the measured ones and their neighbours); nan outside the hull.
"""
import os
import sys

import numpy as np
import pandas
from scipy.interpolate import LinearNDInterpolator

XS = ["num_nodes", "num_replicas", "local_bsz"]
YS = ["step_time", "sync_time"]


def points(app_dir):
    p = pandas.read_csv(os.path.join(app_dir, "placements.csv"))
    p["num_nodes"] = p.placement.apply(lambda x: len(str(x)))
    p["num_replicas"] = p.placement.apply(lambda x: sum(map(int, str(x))))
    # Pollux: placements.groupby(xs)[xs + ys].mean() then append scalability
    # (ignore_index): the group means in key order, then scalability.csv.
    g = p.groupby(XS)[YS].mean().reset_index()
    s = pandas.read_csv(os.path.join(app_dir, "scalability.csv"))
    return pandas.concat([g[XS + YS], s[XS + YS]], ignore_index=True)


def batch_sizes(df):
    lo, hi = int(df.local_bsz.min()), int(df.local_bsz.max())
    if hi - lo <= 1100:
        return list(range(lo, hi + 1))
    out = set()
    for v in df.local_bsz.unique():
        out.update((int(v) - 1, int(v), int(v) + 1))
    for i in range(1100):
        out.add(int(round(lo * (hi / lo) ** (i / 1099))))
    return sorted(b for b in out if lo <= b <= hi)


def main():
    apps_dir = sys.argv[1]
    names = sys.argv[2:] or sorted(os.listdir(apps_dir))
    print("app,num_nodes,num_replicas,local_bsz,step_time,sync_time")
    for name in names:
        df = points(os.path.join(apps_dir, name))
        f = LinearNDInterpolator(df[XS].values, df[YS].values)
        q = [(n, r, b) for n in range(1, 17) for r in range(n, 4 * n + 1) for b in batch_sizes(df)]
        v = f(np.array(q, dtype=float))
        for (n, r, b), (st, sy) in zip(q, v):
            print(f"{name},{n},{r},{b},{float(st)!r},{float(sy)!r}")


if __name__ == "__main__":
    main()
