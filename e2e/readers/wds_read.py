"""Read WebDataset shards (an epoch's record view) and print what was read.

Usage: wds_read.py dali TAR... [--index] [--num-shards N --shard-id K] [--batch-size B]
       wds_read.py webdataset TAR... [--workers W]
       wds_read.py bench-dali TAR... [--index] [--batch-size B] [--threads T] [--no-mmap]

dali: NVIDIA DALI's fn.readers.webdataset, CPU only, the image (jpg or png), the label
(cls) and the metadata (json) of every sample, with the index files beside the tars
(TAR with .idx for .tar) given as index_paths if --index, or the tars scanned without.
webdataset: the webdataset package (PyPI) through a torch DataLoader with W workers, each
reading its own shards.

Prints one JSON object: {"samples": [{"sha256": ..., "label": ..., "key": ..., "uuid": ...},
...]} in the order the reader produced them (exactly one epoch, or the reader's shard of
it); bench-dali prints {"images": n, "seconds": s, "cpu_seconds": c}, one epoch timed.
"""
import argparse
import hashlib
import json
import os
import resource
import sys
import time


def index_paths(tars):
    return [t[: -len(".tar")] + ".idx" for t in tars]


def dali_pipe(args, outputs):
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=args.batch_size, num_threads=args.threads, device_id=None)
    def pipe():
        kw = {"name": "reader", "paths": args.tars, "ext": outputs, "missing_component_behavior": "error",
              "num_shards": args.num_shards, "shard_id": args.shard_id, "dont_use_mmap": args.no_mmap}
        if args.index:
            kw["index_paths"] = index_paths(args.tars)
        return tuple(fn.readers.webdataset(**kw))

    p = pipe()
    p.build()
    return p


def read_dali(args):
    p = dali_pipe(args, ["jpg;png", "cls", "json"])
    n = p.epoch_size("reader")
    if args.num_shards > 1:
        # epoch_size is the whole dataset's; this shard's share is what DALI's sharding gives.
        n = (n * (args.shard_id + 1)) // args.num_shards - (n * args.shard_id) // args.num_shards
    out = []
    while len(out) < n:
        images, labels, metas = p.run()
        for k in range(len(images)):
            if len(out) == n:
                break  # the last batch wraps into the next epoch
            meta = json.loads(metas.at(k).tobytes())
            out.append({
                "sha256": hashlib.sha256(images.at(k).tobytes()).hexdigest(),
                "label": int(labels.at(k).tobytes()),
                "uuid": meta["uuid"],
                "name": meta["name"],
            })
    return out


def read_webdataset(args):
    import torch.utils.data
    import webdataset as wds

    ds = wds.WebDataset(args.tars, shardshuffle=False, empty_check=False).to_tuple("__key__", "jpg;png", "cls", "json")
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=args.workers)
    out = []
    for key, image, cls, meta in loader:
        meta = json.loads(meta)
        out.append({
            "sha256": hashlib.sha256(image).hexdigest(),
            "label": int(cls),
            "key": key,
            "uuid": meta["uuid"],
            "name": meta["name"],
        })
    return out


def bench_dali(args):
    p = dali_pipe(args, ["jpg;png", "cls"])
    n = p.epoch_size("reader")
    start, cpu0 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    done = 0
    while done < n:
        images, labels = p.run()
        done += len(images)
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    return {"images": n, "seconds": time.monotonic() - start,
            "cpu_seconds": (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reader", choices=["dali", "webdataset", "bench-dali"])
    ap.add_argument("tars", nargs="+")
    ap.add_argument("--index", action="store_true")
    ap.add_argument("--num-shards", type=int, default=1)
    ap.add_argument("--shard-id", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-mmap", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if args.reader == "dali":
        json.dump({"samples": read_dali(args)}, sys.stdout)
    elif args.reader == "webdataset":
        json.dump({"samples": read_webdataset(args)}, sys.stdout)
    else:
        json.dump(bench_dali(args), sys.stdout)


if __name__ == "__main__":
    main()
