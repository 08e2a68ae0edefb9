# Sync primitive costs for a freshly written tree: syncfs vs the copy's own files.
# usage: dur.py N SIZE METHOD DIRTY_MB   (METHOD: syncfs | batch | none)
import os, sys, time, ctypes, shutil, concurrent.futures as cf
libc = ctypes.CDLL("libc.so.6", use_errno=True)
N, SIZE, METHOD, DIRTY = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
base = "/var/tmp/s11-small-dur"
tree = f"{base}/tree-{os.getpid()}"; other = f"{base}/other-{os.getpid()}"
os.makedirs(tree)
os.sync()
if DIRTY:
    with open(other, "wb") as f:
        buf = os.urandom(1 << 20)
        for _ in range(DIRTY): f.write(buf)
data = os.urandom(SIZE)
t0 = time.time(); fds = []
for i in range(N):
    d = f"{tree}/d{i//500}"
    if i % 500 == 0: os.makedirs(d)
    fd = os.open(f"{d}/.p{i}", os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, data)
    if METHOD == "batch":
        libc.sync_file_range(fd, ctypes.c_longlong(0), ctypes.c_longlong(0), 2)  # WRITE
    os.rename(f"{d}/.p{i}", f"{d}/f{i}")
    os.close(fd)
    fds.append(f"{d}/f{i}")
t1 = time.time()
if METHOD == "syncfs":
    fd = os.open(tree, os.O_RDONLY); libc.syncfs(fd); os.close(fd)
elif METHOD == "batch":
    with cf.ThreadPoolExecutor(int(os.environ.get("POOL", "4"))) as ex:
        def one(p):
            fd = os.open(p, os.O_RDONLY); os.fdatasync(fd); os.close(fd)
        list(ex.map(one, fds))
    for j in range((N + 499)//500):
        fd = os.open(f"{tree}/d{j}", os.O_RDONLY); os.fsync(fd); os.close(fd)
    fd = os.open(tree, os.O_RDONLY); os.fsync(fd); os.close(fd)
t2 = time.time()
print(f"{METHOD} n={N} size={SIZE} dirty={DIRTY}MB write {t1-t0:.3f}s sync {t2-t1:.3f}s total {t2-t0:.3f}s", flush=True)
os.rename(tree, f"{base}/trash-{os.getpid()}")
if DIRTY: os.unlink(other)
os.sync()
