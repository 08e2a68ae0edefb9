import sys,re,glob,datetime,json
def ts(l):
    m=re.match(r'(\d{4}-\d\d-\d\dT[\d:.]+)Z',l)
    return datetime.datetime.fromisoformat(m.group(1)).timestamp() if m else None
for d in sys.argv[1:]:
  for c in sorted(glob.glob(d+'/*-client.log')):
    s=c.replace('-client','-server')
    cl=open(c).read().splitlines(); sl=open(s).read().splitlines()
    t0=ts(cl[0])
    login=[ts(l) for l in cl if 'data channel sizing' in l]
    up=[ts(l) for l in sl if 'QUIC data connection up' in l]
    start=[ts(l) for l in sl if 'path rate' in l or 'QUIC data connection up' in l]
    js=[json.loads(l) for l in cl if l.startswith('{')]
    secs=js[0].get('seconds') if js else None
    # per-second server tx from quic stats lines
    tx=[re.search(r'tx_mbit=([\d.]+)',l).group(1)[:5] for l in sl if 'side="client"' in l or 'side=client' in l if 'tx_mbit' in l]
    print(c.split('/')[-1][:-11], 'login %.2f'%(login[0]-t0) if login else '', 'quic-up %.2f'%(up[0]-t0) if up else '', 'cp-secs',secs and round(secs,2), 'tx/s', ' '.join(tx))
