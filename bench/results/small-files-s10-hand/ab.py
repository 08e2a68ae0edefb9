import json, os, subprocess, sys, time
H='/var/tmp/s10-small-hand'; port=sys.argv[1]; reps=int(sys.argv[2]); trees=sys.argv[3].split(',')
n=[int(time.time())%100000*100]
res={}
def trunc(d):
    for r,_,fs in os.walk(d):
        for f in fs: os.truncate(os.path.join(r,f),0)
for rep in range(reps):
  for tree in trees:
    for name,F in (('new',H+'/ferry-new'),('old','/var/tmp/old-s10/ferry')) if rep%2==0 else (('old','/var/tmp/old-s10/ferry'),('new',H+'/ferry-new')):
      n[0]+=1; dst=f'{H}/dst/{tree}-{n[0]}'; os.makedirs(dst); os.sync()
      t=time.time(); o=subprocess.run([F,'cp','--json','--no-resume','-q','-r',f'ftp://anonymous@127.0.0.1:{port}/{tree}/',dst+'/'],capture_output=True,text=True); w=time.time()-t
      j=json.loads(o.stdout); trunc(dst)
      res.setdefault((tree,name),[]).append(w)
      print(f'{tree:5} {name} {w:6.2f} s sync {j["sync_seconds"]:.2f} s', flush=True)
for k,v in sorted(res.items()): print(k, ' '.join(f'{x:.2f}' for x in v), 'median %.2f'%sorted(v)[len(v)//2])
