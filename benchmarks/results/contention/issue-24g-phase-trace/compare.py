"""Phase table of two trace folders side by side (CPU ms per op): base vs branch, W = 1 / 4 / 8."""
import os
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from phases import ROWS, load
a, b = sys.argv[1], sys.argv[2]
da = {w: load(a, w) for w in (1, 4, 8)}; db = {w: load(b, w) for w in (1, 4, 8)}
print(f"| phase (CPU ms/op) | W=1 base | branch | W=4 base | branch | W=8 base | branch |")
print("|---|---|---|---|---|---|---|")
extra = [("  write_rebased (union encode)", ["write_rebased|out", "write_rebased|in"]),
         ("  apply_dv_update (DV decode, row checks)", ["apply_dv_update|out", "apply_dv_update|in"]),
         ("  parse_actions (winners)", ["parse_actions(tx)|out", "parse_actions(tx)|in"]),
         ("  check_conflicts", ["check_conflicts|out", "check_conflicts|in"]),
         ("  blind_snapshot", ["blind_snapshot|out"]),
         ("  load_snapshot", ["load_snapshot|out"])]
for name, keys in ROWS + extra:
    cells = []
    for w in (1, 4, 8):
        for d in (da, db):
            cells.append(sum(d[w].get(k, (0, 0, 0))[1] for k in keys))
    print(f"| {name} | " + " | ".join(f"{x:.3f}" for x in cells) + " |")
print()
print("calls per op (W=4 / W=8), base -> branch:")
for k in ["build_snapshot|out", "write_rebased|out", "write_rebased|in", "apply_dv_update|out", "apply_dv_update|in", "turn.wait|out", "turn_taken|out", "fs.stage_commit|out", "fs.stage_commit|in", "gc0|out", "gc1|out", "gc2|out"]:
    print(f"  {k:28s} " + "  ".join(f"W={w}: {da[w].get(k,(0,0,0))[0]:.2f} -> {db[w].get(k,(0,0,0))[0]:.2f}" for w in (4, 8)))
