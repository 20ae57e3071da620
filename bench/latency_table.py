"""Render the latency lab's output (bench/latency.txt) as Markdown tables.

Usage: latency_table.py latency.txt
"""
import re
import sys

rows, ratios, metrics, rss = {}, {}, {}, {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\s+([\d.]+) images/s\s+([\d.]+) MB/s\s+batch p50\s+([\d.]+) ms\s+p99\s+([\d.]+) ms\s+max\s+([\d.]+) ms", line)
    if m:
        rows[m.group(1)] = m.groups()[1:]
        continue
    m = re.match(r"(\S+)\s+([\d.]+) of the same at 0.1 ms", line)
    if m:
        ratios[m.group(1)] = m.group(2)
        continue
    m = re.match(r"(\S+)\s+metrics: (.*)", line)
    if m:
        metrics[m.group(1)] = m.group(2).strip()
        continue
    m = re.match(r"(\S+)\s+daemon peak RSS (\d+) MiB", line)
    if m:
        rss[m.group(1)] = m.group(2)


def table(keys, with_mb=True):
    head = "| configuration | images/s | " + ("MB/s | " if with_mb else "") + "batch p50 ms | batch p99 ms | batch max ms | vs. same at 0.1 ms |"
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for k in keys:
        v = rows[k]
        mb = f" {v[1]} |" if with_mb else ""
        print(f"| {k} | {float(v[0]):,.0f} |{mb} {v[2]} | {v[3]} | {v[4]} | {ratios.get(k, '—')} |")


print("Tight Go reader (16 goroutines, file_list order):\n")
table([k for k in rows if not k.endswith(("/dali", "/torchvision"))])
print("\nDALI `fn.readers.file(file_list=…)` (reader only, batch 64) and torchvision `ImageFolder` +\n`DataLoader(shuffle=True, num_workers=4)` (loader reads the bytes, batch 64):\n")
table([k for k in rows if k.endswith(("/dali", "/torchvision"))], with_mb=False)
print("\ncassfs's own counters at the end of each mount, and the daemon's peak RSS (VmHWM):\n")
print("| mount | peak RSS MiB | metrics |")
print("| --- | --- | --- |")
for k in metrics:
    print(f"| {k} | {rss.get(k, '—')} | {metrics[k]} |")
