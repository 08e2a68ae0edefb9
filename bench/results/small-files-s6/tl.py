import sys,re,collections
# server timeline: per peer, 226 replies count per 0.25 s bucket, relative to the start
start=open(sys.argv[1]+'/start.txt').read().split()[1]
h,m,s=start.split(':'); t0=int(h)*3600+int(m)*60+float(s)
per=collections.defaultdict(list); cmds=[]
for line in open(sys.argv[1]+'/serve.log'):
    mm=re.match(r'\S+T(\d+):(\d+):([\d.]+)Z.*dialogue: (.) (\S+).*peer=(\S+)',line)
    if not mm: continue
    t=int(mm[1])*3600+int(mm[2])*60+float(mm[3])-t0
    if mm[4]=='<' and mm[5]=='226': per[mm[6]].append(t)
    if mm[4]=='>' and mm[5] in ('BRET','PASV','SPAS','EPSV','MLSD','MLSC','LIST','NLST','USER','OPTS','MODE','TYPE'): cmds.append((t,mm[6],mm[5]))
for p,ts in sorted(per.items(), key=lambda x:x[1][0]):
    b=collections.Counter(int(t/0.25) for t in ts)
    print(p, len(ts), 'first %.2f last %.2f'%(ts[0],ts[-1]), ' '.join('%.2f:%d'%(k*0.25,v) for k,v in sorted(b.items())))
for c in cmds: print('%.3f %s %s'%c)
