import sys, time, statistics, shutil
import pyarrow as pa, numpy as np
from dvengine.bench.contention import create_hot_table
from dvengine.api.table import DeltaTable
root=sys.argv[1]; shutil.rmtree(root, ignore_errors=True); create_hot_table(root, 100000)
t=DeltaTable.forPath(None, root)
res={}
for kind in ('delete','merge'):
    cpu=[]; wall=[]
    for i in range(3, 83):
        if kind=='merge':
            ids=np.concatenate([np.arange(i*50, i*50+50), np.arange(10_000_000+i*50, 10_000_000+i*50+50)])
            src=pa.table({'id':pa.array(ids,pa.int64()),'v':pa.array(-ids,pa.int64())})
        c0=time.process_time(); w0=time.perf_counter()
        if kind=='delete':
            t.delete(f"id = {i*17+1}", engine="local")
        else:
            t.alias("t").merge(src, "t.id = s.id", source_alias="s").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
        cpu.append(time.process_time()-c0); wall.append(time.perf_counter()-w0)
    res[kind]=(statistics.median(cpu[5:])*1e3, statistics.median(wall[5:])*1e3)
print(' '.join(f"{k} cpu {c:.2f} wall {w:.2f}" for k,(c,w) in res.items()))
