"""Table and plot of the latency-tolerance curve (BenchmarkLatencyCurve's JSON, written to
CASSFS_BENCH_CURVE).

Usage: latency_curve.py CURVE.json [OUT.png]

Prints a Markdown table: for each reader and round trip, cassfs's images/s, its ratio to
the raw store client at 0.1 ms, to the same reader through cassfs at 0.1 ms and to the same
reader on local disk, the mount's most requests in flight, the daemon's and the database's
CPU per image, and the Go reader over sshfs through the same link. With OUT.png, plots
images/s against the round trip (log scale) for each reader, with local disk as dashed
lines.
"""
import json
import sys

points = json.load(open(sys.argv[1]))


def find(reader, path, rtt=None):
    for p in points:
        if p["reader"] == reader and p["path"] == path and (rtt is None or p["rtt_ms"] == rtt):
            return p
    return None


readers = ["go", "dali", "torchvision"]
rtts = sorted({p["rtt_ms"] for p in points if p["path"] == "cassfs"})
store = find("go", "store-client")
if store:
    print(f"store client at 0.1 ms (16 reads at once): {store['images_per_s']:,.0f} images/s, database CPU {store.get('db_cpu_us', 0):.0f} µs/image\n")
print("| reader | RTT ms | cassfs images/s | vs. store client at 0.1 ms | vs. cassfs at 0.1 ms | vs. local disk | most in flight | daemon CPU µs/image | database CPU µs/image | sshfs images/s (Go reader) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in readers:
    base = find(r, "cassfs", rtts[0]) if rtts else None
    local = find(r, "local-disk")
    if local:
        print(f"| {r} | local disk | {local['images_per_s']:,.0f} | — | — | 1.00 | — | — | — | — |")
    for rtt in rtts:
        p = find(r, "cassfs", rtt)
        if not p:
            continue
        ssh = find("go", "sshfs", rtt) if r == "go" else None
        vs_base = p["images_per_s"] / base["images_per_s"] if base else float("nan")
        vs_local = p["images_per_s"] / local["images_per_s"] if local else float("nan")
        ssh_s = f"{ssh['images_per_s']:,.0f} ({ssh['images']:,} files)" if ssh else "—"
        vs_store = p["images_per_s"] / store["images_per_s"] if store else float("nan")
        inflight = p.get("peak_in_flight")
        print(f"| {r} | {rtt:g} | {p['images_per_s']:,.0f} | {vs_store:.2f} | {vs_base:.2f} | {vs_local:.2f} | {inflight if inflight else '—'} | {p.get('daemon_cpu_us', 0):.0f} | {p.get('db_cpu_us', 0):.0f} | {ssh_s} |")

if len(sys.argv) > 2:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402

    fig, ax = plt.subplots(figsize=(8, 4.8))
    colors = {"go": "tab:blue", "dali": "tab:green", "torchvision": "tab:orange"}
    for r in readers:
        xs = [rtt for rtt in rtts if find(r, "cassfs", rtt)]
        if not xs:
            continue
        ax.plot(xs, [find(r, "cassfs", x)["images_per_s"] for x in xs], marker="o", color=colors[r], label=f"cassfs, {r}")
        local = find(r, "local-disk")
        if local:
            ax.axhline(local["images_per_s"], linestyle="--", linewidth=1, color=colors[r], label=f"local disk, {r}")
    xs = [rtt for rtt in rtts if find("go", "sshfs", rtt)]
    ax.plot(xs, [find("go", "sshfs", x)["images_per_s"] for x in xs], marker="s", color="tab:gray", label="sshfs, go")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(rtts)
    ax.set_xticklabels([f"{x:g}" for x in rtts])
    ax.set_xlabel("round-trip time to the database, ms (emulated)")
    ax.set_ylabel("images/s, one cold epoch")
    ax.set_title("Latency tolerance, default flags")
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
