"""Time one epoch read by torchvision's ImageFolder and a shuffling DataLoader.

Usage: torch_bench.py ROOT [--workers N] [--batch-size N] [--decode]

Prints {"images": n, "seconds": s, "batch_seconds": [...]}. Without --decode the loader
returns each file's bytes (open and read, as ImageFolder's default loader does before PIL
decodes), so the figure is the loading throughput, not PIL's.
"""
import argparse
import json
import sys
import time

import torch
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import default_loader


def read_bytes(path):
    with open(path, "rb") as f:
        return len(f.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--decode", action="store_true")
    args = ap.parse_args()
    loader = default_loader if args.decode else read_bytes
    transform = (lambda img: img.size[0]) if args.decode else None
    ds = ImageFolder(args.root, loader=loader, transform=transform)
    dl = DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    times = []
    n = 0
    start = prev = time.perf_counter()
    for x, _ in dl:
        now = time.perf_counter()
        times.append(now - prev)
        prev = now
        n += len(x)
    json.dump({"images": n, "seconds": prev - start, "batch_seconds": times}, sys.stdout)


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
