"""Time one epoch read by NVIDIA DALI's fn.readers.file(file_list=...), CPU only.

Usage: dali_bench.py FILE_LIST [--batch-size N] [--decode]

Prints one JSON object: {"images": n, "seconds": s, "cpu_seconds": c, "batch_seconds": [...]},
the time of each pipeline run (one batch) and the process's CPU time over the epoch. Without --decode only the reader runs, so the figure is the
loading throughput, not the CPU decoder's.
"""
import argparse
import json
import resource
import sys
import time

from nvidia.dali import fn, pipeline_def


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file_list")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--decode", action="store_true")
    args = ap.parse_args()

    @pipeline_def(batch_size=args.batch_size, num_threads=2, device_id=None, prefetch_queue_depth=2)
    def pipe():
        jpegs, labels = fn.readers.file(file_list=args.file_list, name="reader")
        if args.decode:
            return fn.decoders.image(jpegs, device="cpu"), labels
        return jpegs, labels

    p = pipe()
    p.build()
    n = p.epoch_size("reader")
    batches = -(-n // args.batch_size)
    times = []
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    start = prev = time.perf_counter()
    for _ in range(batches):
        p.run()
        now = time.perf_counter()
        times.append(now - prev)
        prev = now
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    json.dump({"images": n, "seconds": prev - start, "cpu_seconds": cpu, "batch_seconds": times}, sys.stdout)


if __name__ == "__main__":
    main()
