"""Read one epoch through torchvision's ImageFolder and a shuffling multi-worker DataLoader.

Usage: torch_read.py ROOT [--workers N] [--batch-size N] [--epoch-order]

With --epoch-order the DataLoader does not shuffle; the dataset's samples are put in the
epoch's order instead (cassfs names start with the position in the epoch), which is how a
job reads so that it can resume exactly at epoch-N@K.

Each image is decoded by ImageFolder's default loader (PIL); the transform reduces it to the
SHA-256 of its pixels so the test can match it against the source images. Prints one JSON
object: {"classes": [...], "samples": [{"pixels": ..., "label": ...}, ...]} in read order.
"""
import argparse
import hashlib
import json
import os
import sys

import torch
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder


def pixel_hash(img):
    return hashlib.sha256(img.tobytes()).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--epoch-order", action="store_true")
    args = ap.parse_args()
    ds = ImageFolder(args.root, transform=pixel_hash)
    if args.epoch_order:
        ds.samples.sort(key=lambda s: os.path.basename(s[0]))
        ds.targets = [t for _, t in ds.samples]
    dl = DataLoader(ds, batch_size=args.batch_size, shuffle=not args.epoch_order, num_workers=args.workers)
    out = []
    for hashes, labels in dl:
        for h, l in zip(hashes, labels.tolist()):
            out.append({"pixels": h, "label": l})
    json.dump({"classes": ds.classes, "samples": out}, sys.stdout)


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
