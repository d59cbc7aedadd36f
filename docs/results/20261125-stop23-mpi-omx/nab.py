import collections,statistics,sys
d=collections.defaultdict(list)
for line in open(sys.argv[1]):
    f=line.rstrip('\n').split('#')
    if len(f)!=4 or not f[1] or not f[2]: continue
    e,p0,p1,v=f
    a,b=float(p0),float(p1)
    pl='far' if a>0.12 and b>0.12 else ('near' if a<=0.12 and b<=0.12 else 'mixed')
    for x in v.split():
        L,us=x.split(':'); d[(int(L),pl,e)].append(float(us))
for k in sorted(d):
    v=sorted(d[k]); print("%9d %-5s %-40s n=%2d median %8.3f  min %8.3f max %8.3f"%(k[0],k[1],k[2],len(v),statistics.median(v),v[0],v[-1]))
