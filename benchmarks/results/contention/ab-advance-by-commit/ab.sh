#!/bin/bash
# alternating A/B: base worktree vs main working tree
out=$1; shift; pairs=$1; shift
mkdir -p $out
for i in $(seq 1 $pairs); do
  (cd /tmp/base-wt && PYTHONPATH=/tmp/base-wt /work/main/.venv/bin/python -m dvengine.bench.contention "$@" --out $out/base-$i > $out/base-$i.log 2>&1)
  (cd /work/main && /work/main/.venv/bin/python -m dvengine.bench.contention "$@" --out $out/new-$i > $out/new-$i.log 2>&1)
done
echo ab-done
