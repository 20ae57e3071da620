"""Read one epoch through NVIDIA DALI's fn.readers.file, CPU only, and print what was read.

Usage: dali_read.py (--file-list LIST | --file-root ROOT) [--batch-size N] [--no-mmap]
                    [--step-seconds S]

--step-seconds sleeps that long after every batch, as a training step would.

Prints one JSON object: {"samples": [{"sha256": ..., "label": ..., "shape": [h, w, c]}, ...]}
in the order the reader produced them (exactly one epoch), every sample decoded with
fn.decoders.image(device="cpu").
"""
import argparse
import hashlib
import json
import sys
import time

from nvidia.dali import fn, pipeline_def


def main():
    ap = argparse.ArgumentParser()
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--file-list")
    src.add_argument("--file-root")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--no-mmap", action="store_true")
    ap.add_argument("--step-seconds", type=float, default=0)
    args = ap.parse_args()

    @pipeline_def(batch_size=args.batch_size, num_threads=2, device_id=None)
    def pipe():
        kw = {"name": "reader", "dont_use_mmap": args.no_mmap}
        if args.file_list:
            jpegs, labels = fn.readers.file(file_list=args.file_list, **kw)
        else:
            jpegs, labels = fn.readers.file(file_root=args.file_root, **kw)
        images = fn.decoders.image(jpegs, device="cpu")
        return jpegs, labels, images

    p = pipe()
    p.build()
    n = p.epoch_size("reader")
    out = []
    while len(out) < n:
        jpegs, labels, images = p.run()
        if args.step_seconds:
            time.sleep(args.step_seconds)
        for k in range(len(jpegs)):
            if len(out) == n:
                break  # the last batch wraps into the next epoch
            out.append({
                "sha256": hashlib.sha256(jpegs.at(k).tobytes()).hexdigest(),
                "label": int(labels.at(k)[0]),
                "shape": list(images.at(k).shape),
            })
    json.dump({"samples": out}, sys.stdout)


if __name__ == "__main__":
    main()
