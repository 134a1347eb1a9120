#!/usr/bin/env bash
# The whole GPU check on the reference air-gapped box as one job (docs/runner.md, "GPU
# figures"): `make gpu-check` with the box's own python3 (no install step), then, when a
# wheelhouse travelled with the tree, the offline install into a venv over that python3 and
# the family tests on the device in bf16 (tests/runners/test_families.py). Everything it
# writes goes into OUT as flat files (at most 5: gpu-check.json, gpu-check.md,
# gpu-check.log, install.log, gpu-tests.log).
#
#   OUT=DIR [DEVICE=cuda] [WHEELS=dist/wheelhouse] [DEADLINE=330] [TEST_S=120] \
#       [PYTHON=python3] bash benchmarks/gpu_check_box.sh
#
# DEADLINE: no gpu-check section starts after that many seconds (a job has 10 minutes);
# TEST_S bounds the tests. DEVICE=cpu is this script's dry run. Exit status: gpu-check's,
# or the tests' when gpu-check passed.
set -u
OUT=${OUT:-gpu-check-out}
DEVICE=${DEVICE:-cuda}
WHEELS=${WHEELS:-dist/wheelhouse}
PYTHON=${PYTHON:-python3}
VENV=${VENV:-/tmp/fragility-box-venv}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
OUT=$(cd "$OUT" && pwd)
started=$SECONDS

if [ -n "${AB_TREE:-}" ]; then
    items=build/gpu_check_items.jsonl
    [ "$DEVICE" = cpu ] && ab_count="--count 4" || ab_count=""
    for side in before after; do
        tree=$AB_TREE; [ "$side" = after ] && tree=.
        timeout "${AB_S:-150}" "$PYTHON" benchmarks/gpu_ab.py --tree "$tree" --items "$items" \
            --device "$DEVICE" $ab_count --out "$OUT/ab-$side.json" 2>&1 | tee -a "$OUT/ab.log"
    done
fi

"$PYTHON" benchmarks/gpu_check.py --device "$DEVICE" --out "$OUT" \
    --deadline "$(( ${DEADLINE:-330} - (SECONDS - started) ))" 2>&1 | tee "$OUT/gpu-check.log"
status=${PIPESTATUS[0]}

if [ -d "$WHEELS" ]; then
    "$PYTHON" tools/install_offline.py --wheels "$WHEELS" --venv "$VENV" \
        >"$OUT/install.log" 2>&1 || { echo "offline install failed: $OUT/install.log"; \
                                     tail -20 "$OUT/install.log"; exit 1; }
    tail -3 "$OUT/install.log"
    # -p no:cacheprovider: the tree may be read-only; bf16 on the device, as users run
    FRAGILITY_TEST_DEVICE="$DEVICE" FRAGILITY_TEST_DTYPE=bf16 FRAGILITY_CACHE_DIR=/tmp/fcache \
        timeout "${TEST_S:-120}" "$VENV/bin/python" -m pytest -p no:cacheprovider -q \
        tests/runners/test_families.py 2>&1 | tee "$OUT/gpu-tests.log"
    tests=${PIPESTATUS[0]}
    [ "$status" -eq 0 ] && status=$tests
else
    echo "no wheelhouse at $WHEELS: the family tests on the device were not run"
fi
exit "$status"
