#!/bin/bash
set -u
OUT=/tmp/b/ab-relay
mkdir -p $OUT
for lat in 20 0; do
  for side in base relay; do
    if [ $side = base ]; then SRC=/tmp/wt-base; else SRC=/work/main; fi
    (cd $SRC && PYTHONPATH=$SRC /work/main/.venv/bin/python -m dvengine.bench.contention --local-s3 --store-latency-ms $lat --writers 1 4 8 --ops 50 --rows 100000 --repeats 1 --row-level on --ceiling off --out $OUT/lat$lat-$side > $OUT/lat$lat-$side.log 2>&1)
    echo "lat$lat-$side done $(date +%T)" >> $OUT/progress
  done
done
echo all done >> $OUT/progress
