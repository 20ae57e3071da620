import ctypes, mmap, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); n = os.fstat(fd).st_size
    a = libc.mmap(None, n, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 0); os.close(fd)
    buf = (ctypes.c_char * n).from_address(a)
    t = time.monotonic(); s = 0
    for off in range(0, n, 4096): s += buf[off][0]
    dt = time.monotonic() - t
    smaps = open('/proc/self/smaps').read().split('\n')
    pmd = '?'
    for i, l in enumerate(smaps):
        if l.startswith('%x-' % a):
            for l2 in smaps[i+1:i+25]:
                if l2.startswith('FilePmdMapped'): pmd = l2.split()[1]
    print("%s addr %x 2M-aligned %s touch %.1f ms FilePmdMapped %s kB" % (p.split('/')[-3:], a, a % (2<<20) == 0, dt*1000, pmd))
