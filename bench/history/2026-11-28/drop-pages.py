# drop-pages.py EPOCHDIR LOCALROOT N SEED: drops the page cache of N random files of EPOCHDIR's
# file_list.txt, in the mount and in the local tree alike (posix_fadvise DONTNEED).
import os, random, sys
d, root, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
names = [l.split()[0] for l in open(os.path.join(d, "file_list.txt"))]
for name in random.Random(seed).sample(names, n):
    cls, b = os.path.split(name)
    local = os.path.join(root, cls, b.split("_", 1)[1])
    for p in (os.path.join(d, name), local):
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
