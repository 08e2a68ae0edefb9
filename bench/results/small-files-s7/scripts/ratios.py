import json,sys,collections
for path in sys.argv[1:]:
    rows=[json.loads(l) for l in open(path+'/runs.jsonl')]
    case=collections.defaultdict(dict)
    for r in rows:
        fps=r['files_done']/r['wall_s'] if r['wall_s'] else 0
        case[(r['path'],r['tree'],r['direction'])][r['row']]=(fps,r['load_before'])
    print('##',path)
    for (p,t,d),c in case.items():
        f=c.get('ferry',(0,0))[0]; g=c.get('guc-pp-cc8',(0,0))[0]; o=c.get('one-file',(0,0))[0]
        print(f"{p:18} {t:11} {d:8} ferry {f:8.1f} guc {g:8.1f} vsG {f/g if g else 0:5.2f} vs1 {f/o if o else 0:5.2f} load {c['ferry'][1]:.1f}")
