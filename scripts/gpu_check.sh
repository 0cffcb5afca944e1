#!/usr/bin/env bash
# The GPU checks, in one run on a machine with a CUDA GPU (CI has none):
#   1. the device tests: every analysis keeps its tensors on the GPU, the float32 bridge on the
#      GPU computes what plain transformers computes on the CPU (tests/unit/core/test_devices.py);
#   2. the compatibility matrix with the bridge on the GPU
#      (scripts/compatibility_matrix.py --device cuda -> results/compatibility/cuda/...);
#   3. the GPU benchmark (benchmarks/bench_gpu.py -> benchmarks/results/gpu.json).
#
#   OUT=gpu-check bash scripts/gpu_check.sh [tests] [matrix] [bench]   # default: all three
#
# On a machine that cannot download (the project's lent GPU machine), prepare two ignored folders
# here first and carry them: .whl (wheels of this checkout and of the libraries the GPU image
# lacks, for Python 3.12: `pip wheel --no-deps -w .whl .` and `pip download --no-deps ...`) and
# .gpu/smollm2-135m-instruct-shape (config, generation config, chat template and tokenizer of
# SmolLM2-135M-Instruct; its weights do not travel, so the benchmark times that shape with random
# weights and says so). Every step runs even when an earlier one fails; the exit code is the
# first failure's.
set -uo pipefail
STEPS=" ${*:-tests matrix bench} "
OUT=${OUT:-gpu-check}
mkdir -p "$OUT"
status=0
step() {  # step NAME COMMAND...: run it, log it to $OUT/NAME.log, remember the first failure
    local name=$1
    shift
    [[ $STEPS == *" $name "* ]] || return 0
    echo "== $name: $*"
    "$@" 2>&1 | tee "$OUT/$name.log"
    local code=${PIPESTATUS[0]}
    echo "== $name: exit $code"
    if [ "$status" = 0 ]; then status=$code; fi
}

if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
python3 - <<'EOF' || exit 1
import sys, torch
from lens_heads.core.libraries import library_versions
if not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} sees no CUDA GPU: run scripts/gpu_check.sh on a GPU machine")
print(torch.cuda.get_device_name(0), library_versions())
EOF

step tests python3 -m pytest -q -p no:cacheprovider -o addopts="--jaxtyping-packages=lens_heads,beartype.beartype" \
    --junitxml="$OUT/tests.xml" tests/unit/core/test_devices.py
step matrix python3 scripts/compatibility_matrix.py --device cuda
cp results/compatibility/cuda/transformers-*/numbers.json "$OUT/matrix.json" 2>/dev/null

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
step bench python3 -m benchmarks.run --only bench_gpu --out "$OUT/gpu.json" ${GPU_BENCH_ARGS:-}
exit "$status"
