#!/usr/bin/env bash
# lm-evaluation-harness against the runner on the air-gapped GPU box, as one job of its own
# (benchmarks/gpu_lmeval.py; docs/runner.md, "lm-eval on the GPU"). Carries build/ with
# lm-eval's wheels (`make gpu-lmeval-wheels`) and the items (`make gpu-lmeval-items`).
#
#   OUT=DIR [DEVICE=cuda] [PYTHON=python3] [COUNT=300] [REPEATS=2] \
#       [LMEVAL_WHEELS=build/wheels-lmeval] bash benchmarks/gpu_lmeval_box.sh
#
# lm-eval is unpacked with `pip install --target` (the box's python3 is a venv: a new venv
# over it would not see its torch) and put on PYTHONPATH for lm-eval's process only.
# DEVICE=cpu is the dry run. Writes into OUT: install.log, run.log, lmeval.log,
# lmeval.json, ours-N.json, lmeval-samples.jsonl, items.jsonl; then, where the project is
# installed, `python benchmarks/gpu_lmeval.py compare --out OUT` reads them.
set -u
OUT=${OUT:-gpu-lmeval-out}
DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python3}
LMEVAL_WHEELS=${LMEVAL_WHEELS:-build/wheels-lmeval}
SITE=$(mktemp -d /tmp/lmeval-site-XXXXXX)
trap 'rm -rf "$SITE"' EXIT
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if ! ls "$LMEVAL_WHEELS"/*.whl >/dev/null 2>&1; then
    echo "no wheels in $LMEVAL_WHEELS: run \`make gpu-lmeval-wheels\` and carry build/"; exit 2
fi
"$PYTHON" -m pip install --quiet --disable-pip-version-check --no-index --no-deps \
    --target "$SITE" "$LMEVAL_WHEELS"/*.whl >"$OUT/install.log" 2>&1 \
    || { echo "installing lm-eval failed: $OUT/install.log"; tail -20 "$OUT/install.log"; exit 1; }
"$PYTHON" benchmarks/gpu_lmeval.py run --out "$OUT" --device "$DEVICE" --lmeval-site "$SITE" \
    --count "${COUNT:-300}" --repeats "${REPEATS:-2}" 2>&1 | tee "$OUT/run.log"
exit "${PIPESTATUS[0]}"
