import os, time, sys
"""ext4 metadata per file: create + rename (Ferry partials), O_TMPFILE + linkat, create in place.
usage: metadata.py DIR (wait 80 s after deleting anything on the file system: ext4 without a journal skips
inodes freed in the last minute, and the scan dominates)."""
D = sys.argv[1]; N = 2000

def rename(fd, i):
    f = os.open(f".f{i:05}.part", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644, dir_fd=fd)
    os.close(f)
    os.rename(f".f{i:05}.part", f"f{i:05}", src_dir_fd=fd, dst_dir_fd=fd)

def tmpfile(fd, i):
    f = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o644, dir_fd=fd)
    os.link(f"/proc/self/fd/{f}", f"f{i:05}", dst_dir_fd=fd, follow_symlinks=True)
    os.close(f)

def inplace(fd, i):
    os.close(os.open(f"f{i:05}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644, dir_fd=fd))

def run(d, one_file):
    os.makedirs(d); fd = os.open(d, os.O_RDONLY)
    t = time.perf_counter()
    for i in range(N):
        one_file(fd, i)
    return time.perf_counter() - t

for r in range(3):
    for step in (rename, tmpfile, inplace):
        print(f"{step.__name__} {run(f'{D}/{step.__name__}{r}', step):.3f}s", flush=True)
