# interleaved rounds of two checkouts, /work/wt-base and /work/wt-now (git worktrees), each with its own BITA_CACHE;
# OUT: where the benches write (this folder's runs: /tmp/meas-overlap; ../fused-layer's: /tmp/meas-fused)
PY=/work/main/.venv/bin/python; OUT=${OUT:-/tmp/meas-overlap}; mkdir -p $OUT
for i in 1 2 3; do for t in /work/wt-base /work/wt-now; do
  ( cd $t && BITA_CACHE=/tmp/cache-$(basename $t) $PY -m bita bench --suite mt-bench --limit 8 --max-new-tokens 128 --methods ar,bita \
    --json-out $OUT/ab-$(basename $t)-$i.json --markdown $OUT/ab-$(basename $t)-$i.md > $OUT/ab-$(basename $t)-$i.log 2>&1 )
  echo "-- $t round $i $(date +%T)"; grep -E "^\| \*\*all|Milliseconds" $OUT/ab-$(basename $t)-$i.md
done; done
