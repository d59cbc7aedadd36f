import csv,sys,statistics,collections
d=collections.defaultdict(list)
for f in sys.argv[1:]:
    for r in csv.DictReader(open(f)):
        if r['test']!='pingpong': continue
        d[(int(r['length']),r['transport'],f)].append(float(r['time_us']))
lens=sorted({k[0] for k in d})
for f in sys.argv[1:]:
    print(f)
    for L in lens:
        o=d[(L,'omx',f)]; t=d[(L,'tcp',f)]
        if o and t: print("%6d omx %6.2f (%5.2f-%5.2f) tcp %6.2f (%5.2f-%5.2f) ratio %.2f"%(L,statistics.median(o),min(o),max(o),statistics.median(t),min(t),max(t),statistics.median(o)/statistics.median(t)))
