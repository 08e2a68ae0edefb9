import os,time,shutil,sys
base=sys.argv[1]; os.makedirs(base,exist_ok=True)
def make(d,n=5000):
    os.makedirs(d,exist_ok=True); t=time.time(); c0=os.times()
    for i in range(n):
        fd=os.open(f'{d}/f{i:05d}',os.O_CREAT|os.O_WRONLY,0o644); os.write(fd,b'x'*4096); os.close(fd)
    c1=os.times(); return time.time()-t, c1.system-c0.system
print('fresh', make(base+'/a'))
shutil.rmtree(base+'/a')
print('same parent, after delete', make(base+'/b'))
print('sibling dir again', make(base+'/c'))
shutil.rmtree(base+'/b'); shutil.rmtree(base+'/c')
