#!/usr/bin/env python3
"""Markdown table of bench/results/training/*.csv (training_runs.sh):
final test accuracy, images/s (median over epochs) and the communication the
backward pass did not hide, per model, transport and rank count.
usage: training_summary.py [dir]"""
import csv
import glob
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import provenance  # noqa: E402


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "bench/results/training"
    rows = []
    for path in glob.glob(os.path.join(d, "*-n*.csv")):
        m = re.match(r"(.+)-(threads|mpi)-n(\d+)\.csv", os.path.basename(path))
        if not m:
            continue
        epochs = list(csv.DictReader(open(path)))
        if not epochs:
            continue
        last = epochs[-1]
        ips = statistics.median(float(e["images_per_s"]) for e in epochs)
        exposed = sum(float(e["exposed_comm_s"]) for e in epochs)
        total = sum(float(e["epoch_s"]) for e in epochs)
        rows.append((m.group(1), m.group(2), int(m.group(3)), len(epochs), 100 * float(last["test_accuracy"]),
                     max(100 * float(e["test_accuracy"]) for e in epochs), float(last["train_loss"]), ips,
                     exposed, total))
    rows.sort()
    logs = sorted(p[:-len(".csv")] + ".txt" for p in glob.glob(os.path.join(d, "*-n*.csv")))
    print(provenance([p for p in logs if os.path.exists(p)], "bench/tools/training_summary.py " + d) + "\n")
    print("| model | ranks | epochs | final test accuracy | best | final train loss | images/s (median epoch) "
          "| exposed communication / training time |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[2]} ({r[1]}) | {r[3]} | {r[4]:.2f}% | {r[5]:.2f}% | {r[6]:.4f} | {r[7]:.0f} "
              f"| {r[8]:.1f} s / {r[9]:.1f} s |")


if __name__ == "__main__":
    main()
