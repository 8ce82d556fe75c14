"""CPU (thread time) per winner of a loser's catch-up over real winners, in one process.

A 4-writer x 20-op contention table is made once (/tmp/h24c/tbl); each repetition copies it with
the log cut at version 60, plans `DELETE WHERE id = 300` there, and just before the commit puts
the 20 winners 61..80 back (memos cleared), so `_catch_up` reads, checks and rebases over all of
them: read + parse + conflict rules (the append rule on UPDATE winners' new files) + DV load and
row checks + one union encode. `python catchup_per_winner.py 30` with PYTHONPATH=<repo>.
"""
import os, shutil, sys, time, glob
from dvengine.api.table import DeltaTable
from dvengine.commit import transaction as tx
from dvengine.log import commit_file
from dvengine.dv import store as dvs
SRC='/tmp/h24c/tbl'
if not os.path.exists(SRC):
    from dvengine.bench.contention import run_contention
    assert run_contention(SRC, 100000, 4, 20, True).verified
res=[]
for rep in range(int(sys.argv[1]) if len(sys.argv)>1 else 20):
    dst=f'/tmp/h24c/cu-{rep}'
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(SRC, dst)
    held=f'/tmp/h24c/cu-held-{rep}'
    os.makedirs(held, exist_ok=True)
    for p in glob.glob(dst+'/_delta_log/*'):
        n=os.path.basename(p)
        if n[0].isdigit() and int(n.split('.')[0])>60 or n=='_last_checkpoint':
            shutil.move(p, os.path.join(held,n))
    orig=tx.Transaction._catch_up
    def cu(self, version, _o=orig, _h=held, _d=dst):
        if version==61 and not getattr(self,'_done',False):
            self._done=True
            for n in sorted(os.listdir(_h)):
                if n.endswith('.json'): shutil.copy(os.path.join(_h,n), _d+'/_delta_log/'+n)
            commit_file._MEMO.clear(); dvs._INLINE_MEMO.clear()
            c0=time.thread_time(); v=_o(self, version); res.append((time.thread_time()-c0)/(v-61)); return v
        return _o(self, version)
    tx.Transaction._catch_up=cu
    t=DeltaTable.forPath(None, dst)
    t.delete('id = 300', engine='local')
    tx.Transaction._catch_up=orig
    shutil.rmtree(dst); shutil.rmtree(held)
res.sort()
print(f'per winner us: median {1e6*res[len(res)//2]:.1f} min {1e6*res[0]:.1f} max {1e6*res[-1]:.1f} n={len(res)}')
