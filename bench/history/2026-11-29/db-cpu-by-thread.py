#!/usr/bin/env python3
# tcpu.py snap PID OUT | diff A B [N]: per-thread-group CPU (ticks) of a process.
import os, re, sys, json
def snap(pid):
    d = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            s = open(f"/proc/{pid}/task/{t}/stat").read()
        except OSError:
            continue
        name = s[s.index("(")+1:s.rindex(")")]
        f = s[s.rindex(")")+2:].split()
        ticks = int(f[11]) + int(f[12])
        g = re.sub(r"[-:#]?\d+", "", name)
        d[t] = (g, ticks)
    return d
if sys.argv[1] == "snap":
    json.dump(snap(sys.argv[2]), open(sys.argv[3], "w"))
else:
    a, b = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
    n = float(sys.argv[4]) if len(sys.argv) > 4 else 1
    g = {}
    for t, (name, ticks) in b.items():
        g[name] = g.get(name, 0) + ticks - (a.get(t, [name, 0])[1])
    tot = sum(g.values())
    print(f"total {tot*1e4/n:.0f} us/file")
    for name, v in sorted(g.items(), key=lambda x: -x[1])[:14]:
        if v: print(f"  {name:32s} {v*1e4/n:7.0f} us/file")
