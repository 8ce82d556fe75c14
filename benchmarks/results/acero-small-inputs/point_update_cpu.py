import sys, time, statistics, shutil
from dvengine.bench.contention import create_hot_table
from dvengine.api.table import DeltaTable
root=sys.argv[1]; shutil.rmtree(root, ignore_errors=True); create_hot_table(root, 100000)
t=DeltaTable.forPath(None, root)
for i in range(5): t.update(f"id = {i}", {"v": "-1"}, engine="local")
cpu=[]; wall=[]
for i in range(5, 205):
    c0=time.process_time(); w0=time.perf_counter()
    t.update(f"id = {i*13}", {"v": str(-i)}, engine="local")
    cpu.append(time.process_time()-c0); wall.append(time.perf_counter()-w0)
print(f"UPDATE cpu median {statistics.median(cpu)*1e3:.2f} ms wall median {statistics.median(wall)*1e3:.2f} ms")
