#!/usr/bin/env bash
# Quiet-machine measurements for issue 54: before (b326ef1) vs after (main), interleaved, one CPU.
set -uo pipefail
PY=/work/main/.venv/bin/python
OUT=/tmp/meas
P="Write a Python function that reverses a string."
run() { local tree=$1; shift; ( cd $tree && BITA_CACHE=/tmp/cache-$(basename $tree) "$@" ); }  # fresh caches: plans measured quiet
echo "== warm-up (plans, dtype choice cached) $(date +%T)"
for t in /work/wt-before /work/wt-after; do run $t $PY -m bita generate --mode both --prompt "$P" > /dev/null 2>&1; done
echo "== README command x3 interleaved $(date +%T)"
for i in 1 2 3; do
  for t in /work/wt-before /work/wt-after; do
    echo "-- $t round $i"; run $t $PY -m bita generate --mode both --prompt "$P" 2>&1 | grep -E "tokens_per_s|identical|speedup|tree|plan" | tail -4
  done
done
echo "== pass-cost $(date +%T)"
for c in 300 1000; do for t in /work/wt-before /work/wt-after; do
  run $t $PY -m bita pass-cost --context $c --json > $OUT/passcost-$(basename $t)-$c.json 2>$OUT/passcost-$(basename $t)-$c.err
done; done
for t in /work/wt-before /work/wt-after; do
  run $t $PY -m bita pass-cost --context 300 --dtype float32 --json > $OUT/passcost-$(basename $t)-300-f32.json 2>&1
done
echo "== llama.cpp $(date +%T)"
( cd /work/main && bash ../shared/llamacpp/bench.sh ) > $OUT/llamacpp.txt 2>&1
echo "== RSS $(date +%T)"
for k in auto stock; do
  ( cd /work/wt-after && BITA_CACHE=/tmp/cache-wt-after /usr/bin/time -v $PY -m bita generate --max-new-tokens 8 --prompt Hi --kernels $k ) 2>&1 | grep -E "Maximum resident" | sed "s/^/$k /"
done
echo "== MT-Bench greedy $(date +%T)"
( cd /work/wt-after && BITA_CACHE=/tmp/cache-wt-after $PY -m bita bench --suite mt-bench --limit 16 --max-new-tokens 128 --methods hf,ar,bita --json-out $OUT/mtbench-greedy.json --markdown $OUT/mtbench-greedy.md ) > $OUT/mtbench-greedy.log 2>&1
echo "== MT-Bench sampled $(date +%T)"
( cd /work/wt-after && BITA_CACHE=/tmp/cache-wt-after $PY -m bita bench --suite mt-bench --limit 16 --max-new-tokens 128 --methods hf,ar,bita --temperature 0.7 --top-p 0.95 --seed 0 --json-out $OUT/mtbench-sampled.json --markdown $OUT/mtbench-sampled.md ) > $OUT/mtbench-sampled.log 2>&1
echo "== MT-Bench greedy, before $(date +%T)"
( cd /work/wt-before && BITA_CACHE=/tmp/cache-wt-before $PY -m bita bench --suite mt-bench --limit 16 --max-new-tokens 128 --methods ar,bita --json-out $OUT/mtbench-greedy-before.json --markdown $OUT/mtbench-greedy-before.md ) > $OUT/mtbench-greedy-before.log 2>&1
echo "== done $(date +%T)"
