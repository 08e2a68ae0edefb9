import ftplib, io, sys, time
port=int(sys.argv[1]); allo=sys.argv[2]=='allo'; n=int(sys.argv[3])
f=ftplib.FTP(); f.connect('127.0.0.1', port); f.login('anonymous','x')
data=b'x'*4096; ts=[]
for i in range(n):
    t=time.perf_counter()
    if allo: f.sendcmd('ALLO %d'%len(data))
    f.storbinary('STOR f%s%03d'%('a' if allo else 'n', i), io.BytesIO(data))
    ts.append((time.perf_counter()-t)*1e3)
ts.sort()
print('allo' if allo else 'no-allo', 'n=%d median %.1f ms p90 %.1f max %.1f'%(n, ts[n//2], ts[int(n*0.9)], ts[-1]))
