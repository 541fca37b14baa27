# interleaved rounds: /work/wt-base = 94bd72a, /work/wt-now = b871fb1 (git worktrees), each with its own BITA_CACHE
PY=/work/main/.venv/bin/python; OUT=/tmp/meas-fused
for i in 1 2 3; do for t in /work/wt-base /work/wt-now; do
  ( cd $t && BITA_CACHE=/tmp/cache-$(basename $t) $PY -m bita bench --suite mt-bench --limit 8 --max-new-tokens 128 --methods ar,bita \
    --json-out $OUT/ab-$(basename $t)-$i.json --markdown $OUT/ab-$(basename $t)-$i.md > $OUT/ab-$(basename $t)-$i.log 2>&1 )
  echo "-- $t round $i $(date +%T)"; grep -E "^\| \*\*all|Milliseconds" $OUT/ab-$(basename $t)-$i.md
done; done
