"""Write an image tree into the tables other tools lay out, the way their writers do: the
DataStax cassandra-driver, one INSERT per file, uuid4 ids.

Usage: dl_tables.py --hosts H[,H] --keyspace KS --layout plugin ROOT
       dl_tables.py --hosts H[,H] --keyspace KS --layout cassandradl --csv META ROOT

plugin       the Cassandra DALI plugin's example schema (keyspace renamed): for every split
             directory ROOT/<split>/<class>/<file>, KS.data_<split>(id uuid PRIMARY KEY,
             label int, data blob) and KS.metadata_<split>(id uuid PRIMARY KEY, label int,
             or_label text, or_split text); label = index of the class in sorted order,
             or_label = the class directory's name.
cassandradl  the 2021 CassandraDL paper's tables: KS.data_by_uuid(patch_id uuid, label int,
             data blob) and KS.metadata_by_uuid(patient_id text, slide_num int, x int,
             y int, label int, patch_id uuid) for ROOT/<class>/<file>, the metadata from
             META (a CSV: path, patient_id, slide, x, y; the slide's trailing number is slide_num).

Prints one JSON object: {"rows": [{"id": ..., "rel": "<class>/<file>", "label": ...,
"split": ...}, ...]}.
"""
import argparse
import csv
import json
import os
import re
import sys
import uuid

from cassandra.cluster import Cluster


def host_port(h):
    host, _, port = h.partition(":")
    return host, int(port or 9042)


def slide_num(slide):
    """The slide's number among its patient's: "P0004-S1" (cassfs gen's) is 1."""
    digits = re.search(r"(\d+)$", slide)
    return int(digits.group(1)) if digits else 0


def tree(root):
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    for label, c in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(root, c))):
            yield label, c, f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", required=True)
    ap.add_argument("--keyspace", required=True)
    ap.add_argument("--layout", choices=["plugin", "cassandradl"], required=True)
    ap.add_argument("--csv")
    ap.add_argument("root")
    args = ap.parse_args()
    hosts = [host_port(h) for h in args.hosts.split(",")]
    cluster = Cluster([h for h, _ in hosts], port=hosts[0][1])
    s = cluster.connect()
    ks = args.keyspace
    s.execute(f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    out = []
    if args.layout == "plugin":
        for split in sorted(os.listdir(args.root)):
            s.execute(f"CREATE TABLE IF NOT EXISTS {ks}.data_{split}(id uuid, label int, data blob, PRIMARY KEY ((id)))")
            s.execute(f"CREATE TABLE IF NOT EXISTS {ks}.metadata_{split}(id uuid, label int, or_label text, or_split text, PRIMARY KEY ((id)))")
            ins_d = s.prepare(f"INSERT INTO {ks}.data_{split} (id, label, data) VALUES (?, ?, ?)")
            ins_m = s.prepare(f"INSERT INTO {ks}.metadata_{split} (id, label, or_label, or_split) VALUES (?, ?, ?, ?)")
            for label, c, f in tree(os.path.join(args.root, split)):
                with open(os.path.join(args.root, split, c, f), "rb") as fh:
                    data = fh.read()
                i = uuid.uuid4()
                s.execute(ins_d, (i, label, data))
                s.execute(ins_m, (i, label, c, split))
                out.append({"id": str(i), "rel": f"{c}/{f}", "label": label, "split": split})
    else:
        meta = {}
        with open(args.csv, newline="") as fh:
            for r in csv.DictReader(fh):
                meta[r["path"]] = r
        s.execute(f"CREATE TABLE IF NOT EXISTS {ks}.data_by_uuid(patch_id uuid, label int, data blob, PRIMARY KEY ((patch_id)))")
        s.execute(f"CREATE TABLE IF NOT EXISTS {ks}.metadata_by_uuid(patient_id text, slide_num int, x int, y int, label int, patch_id uuid, PRIMARY KEY ((patch_id)))")
        ins_d = s.prepare(f"INSERT INTO {ks}.data_by_uuid (patch_id, label, data) VALUES (?, ?, ?)")
        ins_m = s.prepare(f"INSERT INTO {ks}.metadata_by_uuid (patient_id, slide_num, x, y, label, patch_id) VALUES (?, ?, ?, ?, ?, ?)")
        for label, c, f in tree(args.root):
            with open(os.path.join(args.root, c, f), "rb") as fh:
                data = fh.read()
            m = meta[f"{c}/{f}"]
            i = uuid.uuid4()
            s.execute(ins_d, (i, label, data))
            s.execute(ins_m, (m["patient_id"], slide_num(m["slide"]), int(m["x"]), int(m["y"]), label, i))
            out.append({"id": str(i), "rel": f"{c}/{f}", "label": label, "split": "", "patient": m["patient_id"]})
    cluster.shutdown()
    json.dump({"rows": out}, sys.stdout)


if __name__ == "__main__":
    main()
