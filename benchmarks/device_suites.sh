#!/usr/bin/env bash
# The GPU check: the default suites on CUDA and on the same machine's CPUs, one after the other, with
# their wall times and scorecards, then the library tests whose outcome depends on a CUDA device. Run on a machine with a GPU (the
# workplace's device tool, or any CUDA box) from the repository root:
#
#     OUT=/tmp/gpu bash benchmarks/device_suites.sh
#
# then, on any machine, `faithtests compare --all OUT/cpu.json OUT/cuda.json` applies the noise rule.
# Where the Python there lacks a dependency, put its wheels in .whl/ (they are installed to /tmp/site;
# the repository itself stays first on the path): on the workplace's H200 image that was transformers,
# open_clip_torch, ftfy and wcwidth (open_clip imports ftfy when its tokenizer loads). Never part of
# CI: CI has no GPU.
set -uo pipefail
OUT=${OUT:-/tmp/device-suites}
mkdir -p "$OUT"
log="$OUT/device.log"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl >>"$log" 2>&1 || { echo "wheel install failed" | tee -a "$log"; exit 1; }
    export PYTHONPATH="$PWD:/tmp/site"
else
    export PYTHONPATH="$PWD"
fi
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers',
transformers.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0))"
    nproc; uptime
} 2>&1 | tee -a "$log"

run_suites() {  # $1: device, $2: time limit in seconds
    local start end rc
    start=$(date +%s.%N)
    timeout "$2" python3 -m pytest suites/ -q -p no:cacheprovider --faith-no-progress --faith-device "$1" \
        --faith-report "/tmp/report-$1" -rs >"$OUT/suites-$1.log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    echo "suites on $1: exit $rc, $(python3 -c "print(round($end - $start, 1))") s wall" | tee -a "$log"
    cp "/tmp/report-$1/scorecard.json" "$OUT/$1.json" 2>/dev/null
}
run_suites cuda "${CUDA_LIMIT:-240}"
nvidia-smi --query-gpu=memory.used --format=csv,noheader | sed 's/^/GPU memory after: /' | tee -a "$log"
# the library tests whose outcome depends on a CUDA device being there (device checks, gpu marking)
python3 -m pytest tests/reliability/test_usage_errors.py tests/plugin/test_plugin_models.py -q \
    -p no:cacheprovider -k "cuda or device" >"$OUT/gpu-library.log" 2>&1
echo "CUDA-dependent library tests: exit $? ($(tail -1 "$OUT/gpu-library.log"))" | tee -a "$log"
# the gpu-marked library tests (skipped without CUDA elsewhere)
python3 -m pytest tests/protocols/spdfaith/test_spdfaith_sage_step.py -q -p no:cacheprovider -m gpu \
    >"$OUT/gpu-marked.log" 2>&1
echo "gpu-marked library tests: exit $? ($(tail -1 "$OUT/gpu-marked.log"))" | tee -a "$log"
# the same machine's CPUs (CPU_LIMIT=0 skips them: compare with a CPU run made elsewhere instead)
[ "${CPU_LIMIT:-240}" != 0 ] && run_suites cpu "${CPU_LIMIT:-240}"
uptime | tee -a "$log"
