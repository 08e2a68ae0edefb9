#!/usr/bin/env python3
# Hand sweep of fixed settings vs automatic on loopback: ferry cp -r, one process per run.
import json, os, subprocess, sys, time
F = sys.argv[1]; port = sys.argv[2]; port_nb = sys.argv[3]; reps = int(sys.argv[4]); trees = sys.argv[5].split(','); dirs = sys.argv[6].split(',')
settings = sys.argv[7].split(';')
H = '/var/tmp/s10-small-hand'
n = [int(time.time()) % 100000 * 100]
def truncate(d):
    for r, _, fs in os.walk(d):
        for f in fs:
            try: os.truncate(os.path.join(r, f), 0)
            except OSError: pass
def run(tree, direction, setting):
    n[0] += 1
    flags = [] if setting == 'auto' else setting.split()
    p = port
    if 'NB' in flags: flags.remove('NB'); p = port_nb
    if direction == 'down':
        dst = f'{H}/dst/{tree}-{n[0]}'; os.makedirs(dst)
        cmd = [F, 'cp', '--json', '--no-resume', '-q', '-r'] + flags + [f'ftp://anonymous@127.0.0.1:{p}/{tree}/', dst + '/']
    else:
        dst = f'{H}/root/up/{tree}-{n[0]}'
        cmd = [F, 'cp', '--json', '--no-resume', '-q', '-r'] + flags + [f'{H}/root/{tree}/', f'ftp://anonymous@127.0.0.1:{p}/up/{tree}-{n[0]}/']
    os.sync()
    t = time.time(); out = subprocess.run(cmd, capture_output=True, text=True); w = time.time() - t
    try:
        j = json.loads(out.stdout); c = j.get('concurrency', {}); ss = j.get('sync_seconds', 0)
    except Exception:
        j = {}; c = {}; ss = float('nan')
    files = sum(len(fs) for _, _, fs in os.walk(dst))
    truncate(dst)
    print(f'{tree:5} {direction:4} {setting:22} {w:6.2f} s  {files/w:8.0f} files/s  sync {ss:5.2f} s  sessions {c.get("sessions")} rc {out.returncode} {out.stderr.strip()[-120:]}', flush=True)
os.makedirs(f'{H}/dst', exist_ok=True); os.makedirs(f'{H}/root/up', exist_ok=True)
for rep in range(reps):
    for tree in trees:
        for d in dirs:
            for s in settings:
                run(tree, d, s)
