# interleaved rounds of /work/wt-base (ff4a37c) and /work/wt-now, one shared BITA_CACHE (the same plan and tree);
# greedy and sampled (T 0.7, top-p 0.95, seed 0), 8 MT-Bench first turns, 128 new tokens
PY=/work/main/.venv/bin/python; OUT=${OUT:-/tmp/meas-host}; mkdir -p $OUT
for i in 1 2 3; do for mode in greedy sampled; do for t in /work/wt-base /work/wt-now; do
  extra=""; [ $mode = sampled ] && extra="--temperature 0.7 --top-p 0.95 --seed 0"
  name=$mode-$(basename $t)-$i
  ( cd $t && $PY -m bita bench --suite mt-bench --limit 8 --max-new-tokens 128 --methods ar,bita $extra \
    --json-out $OUT/$name.json --markdown $OUT/$name.md > $OUT/$name.log 2>&1 )
  echo "-- $name $(date +%T)"; grep -E "^\| \*\*all|Milliseconds|^Tree choice" $OUT/$name.md
done; done; done
