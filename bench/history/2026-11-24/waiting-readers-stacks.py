# Shares of perf samples by where the stack is: perf script -i FILE | python3 waiting-readers-stacks.py
import sys, collections, re
# categorise perf script samples by the innermost-first stack: rules checked against the whole stack
rules = [
 ("sysmon", r"runtime\.sysmon"),
 ("gc", r"gcBgMarkWorker|gcAssist|markroot|bgsweep|bgscavenge|gcDrain"),
 ("fuse notify(push)", r"InodeNotifyStoreCache|notifyWrite"),
 ("fuse READ", r"fuse\.doRead"),
 ("fuse LOOKUP", r"fuse\.doLookup"),
 ("fuse READ writev", r"XXXX"),
 ("fuse other op", r"protocolServer\)\.handleRequest"),
 ("fuse read /dev/fuse", r"readRequest\.handleEINTR|readRequest\.func|readRequest\+"),
 ("fuse reply writev", r"fuseFD\)\.write"),
 ("gocql recv frame", r"gocql\.\(\*Conn\)\.recv|gocql\.\(\*Conn\)\.serve"),
 ("gocql exec/send", r"gocql\.\(\*Conn\)\.exec|gocql\.\(\*Query\)|gocql\.\(\*queryExecutor|gocql\.\(\*Session\)"),
 ("crc verify", r"Verify"),
 ("cache.run other", r"prefetch\.\(\*Cache\)\.run"),
 ("prefetcher", r"prefetch\."),
 ("lookahead", r"lookahead|Lookahead"),
 ("sched idle/findRunnable", r"findRunnable|runtime\.schedule|park_m|mcall|stopm|mPark"),
 ("netpoll", r"netpoll"),
]
cnt = collections.Counter(); tot = 0
stack = []
def flush():
    global tot
    if not stack: return
    s = "\n".join(stack); tot_add = 1
    for name, rx in rules:
        if re.search(rx, s):
            cnt[name] += 1; break
    else:
        cnt["other: " + (stack[-3] if len(stack) > 2 else stack[-1])[:60]] += 1
    tot += 1
for line in sys.stdin:
    line = line.rstrip()
    if not line:
        flush(); stack = []; continue
    if line.startswith("\t") or line.startswith(" "):
        parts = line.split(None, 1)
        if len(parts) == 2:
            stack.append(parts[1])
    # header lines ignored
flush()
for k, v in cnt.most_common(30):
    print(f"{100*v/tot:5.1f}% {k}")
print("samples", tot)
