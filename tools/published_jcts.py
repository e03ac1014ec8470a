#!/usr/bin/env python3
"""Compare a policy's per-job JCTs with the Pollux artifact's, per workload and load.

Reads the jcts.csv files that `make sim-report sim-loads` writes (docs/sim/workload-N and
docs/sim/load-X/workload-N) and the published per-job JCTs
(<traces>/pollux/published/<system>-<load>.json). Prints, per workload and load, the ratio of
the mean, median and p95 JCT to the published (MISS where the mean is more than 3% off or the
median or p95 more than 5%) and the jobs within a second; with -jobs N, the N jobs furthest off
and the ratio per application.

  tools/published_jcts.py -traces /work/shared/traces [-policy tiresias -system tiresias]
      [-docs docs/sim] [-jobs 10]
"""
import argparse
import csv
import json
import os


def quantile(xs, q):
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    i = int(pos)
    return xs[-1] if i >= len(xs) - 1 else xs[i] + (pos - i) * (xs[i + 1] - xs[i])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-traces", required=True)
    ap.add_argument("-docs", default="docs/sim")
    ap.add_argument("-policy", default="tiresias")
    ap.add_argument("-system", default="tiresias", help="pollux, optimus or tiresias")
    ap.add_argument("-jobs", type=int, default=0)
    a = ap.parse_args()
    misses = 0
    for load in ("0.5", "1.0", "1.5", "2.0"):
        with open(os.path.join(a.traces, "pollux", "published", f"{a.system}-{load}.json")) as f:
            pub = json.load(f)["jcts"]
        folder = a.docs if load == "1.0" else os.path.join(a.docs, f"load-{load}")
        for w in range(1, 7):
            name = f"workload-{w}"
            with open(os.path.join(folder, name, "jcts.csv")) as f:
                ours = {r["job"]: float(r[a.policy]) for r in csv.DictReader(f) if r.get(a.policy)}
            p = {k: v for k, v in pub[name].items() if k in ours}
            x, y = [ours[k] for k in p], [p[k] for k in p]
            mean, med, p95 = sum(x) / sum(y), quantile(x, .5) / quantile(y, .5), quantile(x, .95) / quantile(y, .95)
            same = sum(1 for k in p if abs(ours[k] - p[k]) < 1)
            miss = abs(mean - 1) > .03 or abs(med - 1) > .05 or abs(p95 - 1) > .05
            misses += miss
            print(f"{load}x {name}: mean {mean:.3f} median {med:.3f} p95 {p95:.3f} same {same}/{len(p)}"
                  + (" MISS" if miss else ""))
            if a.jobs:
                off = sorted(p, key=lambda k: -abs(ours[k] - p[k]))[:a.jobs]
                for k in off:
                    print(f"    {k:16s} ours {ours[k]:9.0f} published {p[k]:9.0f} ratio {ours[k] / p[k]:.2f}")
                apps = {}
                for k in p:
                    apps.setdefault(k.rsplit("-", 1)[0], []).append(k)
                for app, ks in sorted(apps.items()):
                    r = sum(ours[k] for k in ks) / sum(p[k] for k in ks)
                    print(f"    app {app:12s} {len(ks):3d} jobs, sum ratio {r:.3f}")
    print(f"{misses} of 24 miss")


if __name__ == "__main__":
    main()
