#!/usr/bin/env python3
"""Classify the cpu-clock samples of a `perf record -g` profile.

    perf script -i X.perf.data -F comm,tid,ip,sym | classify.py [GB]

Each sample is put in one class by its call chain (kernel chains are whole;
the user part stops at the first frame without a frame pointer):
the system call it is in (the outermost __x64_sys_* frame), or for user
code the leaf's crate. Prints ms-equivalent samples per class and, with
GB, CPU seconds per GB (samples x 250 us: perf's default 4 kHz).
"""
import collections, re, sys

gb = float(sys.argv[1]) if len(sys.argv) > 1 else None
period = 1 / 4000.0

def classify(comm, frames):
    syms = [s for _, s in frames]
    ks = [s for a, s in frames if a.startswith("ffffffff")]
    # the system call: the frame do_syscall_64 called
    sysc = []
    for i, s in enumerate(ks):
        if s == "do_syscall_64" and i > 0:
            sysc = [re.sub(r"^(__x64_sys_|__do_sys_|___?sys_|__se_sys_)+", "", ks[i - 1])]
    leaf = syms[0] if syms else "?"
    if sysc:
        name = sysc[-1]
        if name in ("pread64", "read") and any("shmem" in s for s in ks):
            return "sys pread (tmpfs source)"
        if name in ("read", "write") and any("eventfd" in s for s in ks):
            return f"sys {name} (eventfd)"
        # the page faults of a copy into fresh memory
        if any(s == "asm_exc_page_fault" for s in ks):
            return f"sys {name}: page faults"
        return f"sys {name}"
    if any(s == "asm_exc_page_fault" for s in ks):
        return "page faults (user)"
    if ks and any(s.startswith("asm_sysvec") or s.startswith("irq") or "softirq" in s for s in ks):
        return "interrupts"
    if ks:
        return "kernel other (" + ks[-1] + ")"
    if "memmove" in leaf or "memcpy" in leaf:
        return "user memcpy"
    if "memset" in leaf:
        return "user memset"
    if leaf.startswith("ferry_udt::"):
        return "ferry_udt (protocol core)"
    if leaf.startswith("ferry_io::udt") or leaf.startswith("ferry_io::transport::udt"):
        return "ferry_io::udt (driver)"
    if leaf.startswith("ferry_io::") or leaf.startswith("ferry_proto::"):
        return "ferry_io/proto other (framer, loops)"
    if re.search(r"malloc|free|_int_|cfree|realloc", leaf):
        return "malloc/free"
    if "pthread" in leaf or "syscall" == leaf or "futex" in leaf or leaf.startswith("std::sys::sync"):
        return "user locks/condvar"
    if leaf.startswith("nix::") or leaf.startswith("std::") or leaf.startswith("core::") or leaf.startswith("alloc::"):
        return "user std/nix"
    return "user other"

def main():
    cls = collections.Counter()
    threads = collections.Counter()
    comm, frames = None, []
    total = 0
    def flush():
        nonlocal total
        if comm is None:
            return
        c = classify(comm, frames)
        t = re.sub(r"\d+$", "N", comm)
        cls[c] += 1
        threads[t] += 1
        total += 1
    for line in sys.stdin:
        if not line.strip():
            flush(); comm, frames = None, []
            continue
        if not line.startswith("\t") and not line.startswith(" " * 8):
            flush()
            parts = line.split()
            comm, frames = " ".join(parts[:-1]), []
            continue
        m = re.match(r"\s*([0-9a-f]+)\s+(.*)", line)
        if m:
            frames.append((m.group(1), m.group(2).strip()))
    flush()
    def row(name, n):
        secs = n * period
        per = f"{secs / gb:6.3f}" if gb else ""
        return f"{name:50s} {n:7d} {100.0 * n / max(total,1):5.1f}% {per}"
    print(f"{'class':50s} {'samples':>7s} {'share':>6s} {'s/GB' if gb else ''}")
    for c, n in cls.most_common():
        print(row(c, n))
    print(row("TOTAL", total))
    print("-- threads")
    for c, n in threads.most_common():
        print(row(c, n))

main()
