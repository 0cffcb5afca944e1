#!/usr/bin/env bash
# The GPU checks, in one run on a machine with a CUDA GPU (CI has none), in order of priority,
# each under a time cap so that the whole fits a 15-minute GPU window (about 12 minutes here):
#   1. scale (issue 44): the papers' model sizes with random weights made on the GPU -- the
#      Llama-3.1-8B shape's mask training against plain transformers, its 1,024 single-head
#      effects, a removal sweep, gate fits, larger batches, checkpointing, the Qwen2.5-14B shape,
#      the 8B with layers in CPU memory -- each beside the plan's prediction
#      (benchmarks/bench_scale_gpu.py -> $OUT/scale/numbers.json; store it as
#      results/benchmarks/gpu/scale/numbers.json);
#   2. the device tests: every analysis keeps its tensors on the GPU, the float32 bridge on the
#      GPU computes what plain transformers computes on the CPU (tests/unit/core/test_devices.py);
#   3. the compatibility matrix with the bridge on the GPU
#      (scripts/compatibility_matrix.py --device cuda -> results/compatibility/cuda/...);
#   4. the GPU benchmark (benchmarks/bench_gpu.py -> benchmarks/results/gpu.json).
#
#   OUT=gpu-check bash scripts/gpu_check.sh [scale] [tests] [matrix] [bench]   # default: all
#   DRY=1 OUT=/tmp/gpu-dry bash scripts/gpu_check.sh   # the same steps on a CPU, tiny shapes
#
# DRY=1 runs every step on a machine without a GPU: scale with scaled-down shapes (its numbers
# measure nothing), the device tests (they skip), the matrix's Llama family on the CPU, the
# benchmark (it reports itself skipped). It checks the script, not the GPU.
#
# On a machine that cannot download (the project's lent GPU machine), prepare two ignored folders
# here first and carry them: .whl (wheels of this checkout and of the libraries the GPU image
# lacks, for Python 3.12: `pip wheel --no-deps -w .whl .` and `pip download --no-deps ...`) and
# .gpu/smollm2-135m-instruct-shape (config, generation config, chat template and tokenizer of
# SmolLM2-135M-Instruct; its weights do not travel, so the benchmark times that shape with random
# weights and says so). Every step runs even when an earlier one fails; the exit code is the
# first failure's.
set -uo pipefail
STEPS=" ${*:-scale tests matrix bench} "
OUT=${OUT:-gpu-check}
DRY=${DRY:-}
mkdir -p "$OUT"
status=0
step() {  # step NAME CAP COMMAND...: run it for at most CAP seconds, log it to $OUT/NAME.log,
    local name=$1 cap=$2  #           remember the first failure
    shift 2
    [[ $STEPS == *" $name "* ]] || return 0
    echo "== $name (at most $cap s): $*"
    timeout --kill-after=20 "$cap" "$@" 2>&1 | tee "$OUT/$name.log"
    local code=${PIPESTATUS[0]}
    echo "== $name: exit $code$([ "$code" = 124 ] && echo ' (cut at its cap)')"
    if [ "$status" = 0 ]; then status=$code; fi
}

if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
DRY="$DRY" python3 - <<'EOF' || exit 1
import os, sys, torch
from lens_heads.core import library_versions
if not torch.cuda.is_available() and not os.environ.get("DRY"):
    sys.exit(f"torch {torch.__version__} sees no CUDA GPU: run scripts/gpu_check.sh on a GPU machine"
             " (or DRY=1 for a dry run on the CPU)")
print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "dry run on the CPU",
      library_versions())
EOF

step scale "${SCALE_CAP:-450}" python3 -m benchmarks.bench_scale_gpu --out "$OUT/scale" \
    --budget "${SCALE_BUDGET:-400}" ${DRY:+--dry-run}
step tests 90 python3 -m pytest -q -p no:cacheprovider -o addopts="--jaxtyping-packages=lens_heads,beartype.beartype" \
    --junitxml="$OUT/tests.xml" tests/unit/core/test_devices.py
if [ -n "$DRY" ]; then
    step matrix 300 python3 scripts/compatibility_matrix.py --device cpu --only llama --no-store
else
    step matrix 150 python3 scripts/compatibility_matrix.py --device cuda
    cp results/compatibility/cuda/transformers-*/numbers.json "$OUT/matrix.json" 2>/dev/null
fi

if [[ $STEPS == *" bench "* ]] && [ -d .gpu/smollm2-135m-instruct-shape ]; then
    python3 - <<'EOF' || exit 1
import shutil, torch, transformers
source, folder = ".gpu/smollm2-135m-instruct-shape", "/tmp/smollm2-135m-instruct-shape"
config = transformers.AutoConfig.from_pretrained(source)
torch.manual_seed(0)
transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
    shutil.copy(f"{source}/{name}", folder)
EOF
    export LENS_HEADS_GPU_BENCH_MODEL=/tmp/smollm2-135m-instruct-shape
fi
step bench 120 python3 -m benchmarks.run --only bench_gpu --out "$OUT/gpu.json" ${GPU_BENCH_ARGS:-}
exit "$status"
