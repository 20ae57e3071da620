"""Time torchvision's ImageFolder initialisation on a tree: the listing of every class
directory and the (path, label) list it builds, before any file is read.

Usage: imagefolder_init.py ROOT

Prints {"samples": n, "classes": c, "seconds": s}.
"""
import json
import sys
import time

from torchvision.datasets import ImageFolder


def main():
    start = time.perf_counter()
    ds = ImageFolder(sys.argv[1])
    took = time.perf_counter() - start
    json.dump({"samples": len(ds), "classes": len(ds.classes), "seconds": took}, sys.stdout)


if __name__ == "__main__":
    main()
