# Prints, per case and path, the automatic Ferry row of a ferry-small-files README: files/s, ÷ the best Globus row,
# ÷ the same bytes as one file, new ÷ old, and ÷ the better of lftp and rclone. Usage: python3 ratios.py README.md
import sys,re
cur=None
rows={}
for line in open(sys.argv[1]):
    m=re.match(r'## (\S+), (\w+)',line)
    if m: cur=(m.group(1),m.group(2)); continue
    if line.startswith('| ') and cur and not line.startswith('| path'):
        c=[x.strip() for x in line.strip().strip('|').split('|')]
        if len(c)<13: continue
        path,row=c[0],c[1]
        d=rows.setdefault((cur,path),{})
        d[row]=c
for (case,path),d in rows.items():
    f=[v for k,v in d.items() if k.startswith('ferry cp -r (automatic)') and 'old' not in k]
    if not f: continue
    f=f[0]
    lr=[float(v[7]) for k,v in d.items() if k.startswith('lftp') or k.startswith('rclone')]
    ratio_lr = float(f[7])/max(lr) if lr else float('nan')
    print(f"{case[0]:12} {case[1]:8} {path:18} {f[7]:>9} files/s  vsGlobus {f[9]:>7} vsOne {f[10]:>7} new/old {f[11]:>6}  vs-lftp/rclone {ratio_lr:.2f}")
