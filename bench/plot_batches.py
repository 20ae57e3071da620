"""Plot per-batch load time over an epoch, strict order vs arrival binding (the 2025 paper's
Figure 4), from the JSON BenchmarkLatency writes (CASSFS_BENCH_BATCHES).

Usage: plot_batches.py BATCHES.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

data = json.load(open(sys.argv[1]))
panels = [k for k in ["rtt-150ms", "rtt-150ms-congested"] if any(n.startswith(k + "/") for n in data)]
fig, axes = plt.subplots(len(panels), 1, figsize=(10, 3.6 * len(panels)), squeeze=False)
for ax, link in zip(axes[:, 0], panels):
    for mode, style in [("strict", "-"), ("arrival", "--")]:
        for epoch in ["epoch-0", "epoch-1"]:
            key = f"{link}/{mode}/{epoch}"
            if key in data:
                ax.plot([t * 1000 for t in data[key]], style, marker=".", label=f"{mode}, {epoch}", linewidth=1)
    ax.set_title(f"{link}: per-batch load time (64 images), 16 parallel readers in file_list order")
    ax.set_xlabel("batch")
    ax.set_ylabel("ms until the batch is complete")
    ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
