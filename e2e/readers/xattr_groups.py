"""Group one epoch's tiles by patient through the mount's extended attributes, and join the
split's samples.csv with the epoch's file_list.txt.

Usage: xattr_groups.py EPOCH_DIR SAMPLES_CSV

Reads every file of file_list.txt in order (prefetching and binding happen as for any
reader), asks os.getxattr for its patient_id and uuid, and counts tiles per patient.
Then joins samples.csv with file_list.txt on class and file (the entry's name after its
"<pos>_" prefix) and counts the lines that find their row and whose row names the uuid the
file carries (under strict binding every one; under arrival binding the name's own row and
the bound sample may differ, so the uuid is compared with the row of the bound sample's
name). Prints {"files", "patients", "joined", "uuid_matches", "listxattr"} as JSON.
"""
import collections
import csv
import hashlib
import json
import os
import sys


def main():
    root, table = sys.argv[1], sys.argv[2]
    with open(os.path.join(root, "file_list.txt")) as f:
        entries = [line.rsplit(" ", 1)[0] for line in f if line.strip()]
    patients = collections.Counter()
    carried = {}  # entry -> (uuid, ingest name, sha256 of content)
    for e in entries:
        p = os.path.join(root, e)
        with open(p, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        patients[os.getxattr(p, "user.patient_id").decode()] += 1
        carried[e] = (os.getxattr(p, "user.cassfs.uuid").decode(),
                      os.getxattr(p, "user.cassfs.name").decode(), digest,
                      os.getxattr(p, "user.cassfs.sha256").decode())
    with open(table, newline="") as f:
        rows = list(csv.DictReader(f))
    by_file = {(r["class"], r["file"]): r for r in rows}
    by_name = {r["name"]: r for r in rows}
    joined = matches = content = 0
    for e in entries:
        cls, entry = e.split("/", 1)
        if (cls, entry.split("_", 1)[1]) in by_file:
            joined += 1
        uuid, name, digest, sha = carried[e]
        if by_name.get(name, {}).get("uuid") == uuid and by_name[name]["sha256"] == sha:
            matches += 1
        if sha == digest:
            content += 1
    print(json.dumps({
        "files": len(entries),
        "rows": len(rows),
        "patients": patients,
        "joined": joined,
        "uuid_matches": matches,
        "content_matches": content,
        "listxattr": sorted(os.listxattr(os.path.join(root, entries[0]))),
    }))


if __name__ == "__main__":
    main()
