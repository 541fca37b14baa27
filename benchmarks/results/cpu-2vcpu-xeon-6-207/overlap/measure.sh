#!/usr/bin/env bash
# Issue 56 on a CPU (no GPU here): before (6509b7e, the base commit) vs after (the overlapped loop and the host
# work cuts), interleaved in one quiet hour, fresh caches per checkout. On a CPU the loop runs its passes in turn
# (Decoding.overlap is on by default on a GPU only): this checks that nothing got slower here.
set -uo pipefail
PY=/work/main/.venv/bin/python
OUT=${OUT:-/tmp/meas-overlap}; mkdir -p $OUT
P="Write a Python function that reverses a string."
run() { local tree=$1; shift; ( cd $tree && BITA_CACHE=/tmp/cache-$(basename $tree) "$@" ); }
echo "== $(grep -m1 'model name' /proc/cpuinfo) $(date +%T)"
echo "== warm-up (plans, dtype choice cached)"
for t in /work/wt-base /work/wt-now; do run $t $PY -m bita generate --mode both --prompt "$P" > /dev/null 2>&1; done
echo "== README command x3 interleaved $(date +%T)"
for i in 1 2 3; do
  for t in /work/wt-base /work/wt-now; do
    echo "-- $t round $i"; run $t $PY -m bita generate --mode both --prompt "$P" 2>&1 | grep -E "tok/s|identical" | tail -4
  done
done
echo "== 8 MT-Bench first turns, greedy, 128 new tokens, ar,bita in one process each $(date +%T)"
for t in /work/wt-base /work/wt-now; do
  run $t $PY -m bita bench --suite mt-bench --limit 8 --max-new-tokens 128 --methods ar,bita \
    --json-out $OUT/mtbench8-$(basename $t).json --markdown $OUT/mtbench8-$(basename $t).md > $OUT/mtbench8-$(basename $t).log 2>&1
  tail -12 $OUT/mtbench8-$(basename $t).md
done
echo "done $(date +%T)"
