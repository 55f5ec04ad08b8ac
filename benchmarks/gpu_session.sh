#!/usr/bin/env bash
# One call on a lent GPU machine (issue 11). The machine has no package registry: the wheels it
# lacks travel in .whl (benchmarks/gpu_wheels.sh). Then the named steps run, each under its own
# time limit; logs and results go under $OUT.
#   bash benchmarks/gpu_session.sh tests blocks dsg-profile scale-small race scale deformed huge rff-batch nystrom
# (rff-batch reads the data that huge writes to /tmp/huge.)
# (tests-bg: make test-gpu in the background, beside the steps after it.)
# Steps longer than one call (10 min): start it detached (setsid, OUT=/tmp/gpu-out) and collect
# /tmp/gpu-out/session.tgz with later calls while the machine is warm.
# SCALE_EXTRA / DEFORMED_EXTRA: more gpu.py arguments for those steps (--caps, --n-test, ...).
# $OUT gets one tarball (session.tgz, refreshed after every step) of the logs and results.
set -u
OUT=${OUT:-/tmp/gpu-out}
W=/tmp/gpu-session
mkdir -p "$OUT" "$W"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi > "$W/nvidia-smi.txt" 2>&1
head -12 "$W/nvidia-smi.txt"
nproc; free -g | head -2; df -h /tmp | tail -1
R="$W/results"
mkdir -p "$R"
step() {  # name, limit in seconds, command...
  local name=$1 limit=$2; shift 2
  echo "=== $name (limit ${limit}s) $(date +%T)"
  local t=$SECONDS
  timeout "$limit" "$@" > "$W/$name.log" 2>&1
  local rc=$?
  tail -${TAIL:-25} "$W/$name.log"
  echo "=== $name rc=$rc in $((SECONDS - t)) s"
  tar czf "$OUT/session.tgz" -C "$W" .
}
TAG=${TAG:-$(date +%F)-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-' | tr -cd 'A-Za-z0-9-')}
for s in "$@"; do
  case $s in
    tests) step tests ${TESTS_LIMIT:-280} make test-gpu ;;
    tests-bg) (timeout ${TESTS_LIMIT:-280} make test-gpu > "$W/tests.log" 2>&1; echo "tests rc=$?" >> "$W/tests.log") &
              echo "=== tests started in the background $(date +%T)" ;;  # beside the next steps
    blocks) step blocks 90 python3 benchmarks/gpu.py --sections blocks --out "$R" --tag "$TAG" ;;
    dsg-profile) step dsg-profile 90 python3 benchmarks/gpu.py --sections dsg-profile --out "$R" \
                   --tag "$TAG-profile" ;;
    scale-small) step scale-small 110 python3 benchmarks/gpu.py --sections scale --n 1000000 \
                   --n-test 100000 --scale-cap 10 --out "$R" --tag "$TAG-1M" ;;
    scale) step scale ${SCALE_LIMIT:-330} python3 benchmarks/gpu.py --sections scale --workdir /tmp \
             --scale-cap ${SCALE_CAP:-90} --caps ${SCALE_CAPS:-} --estimators ${SCALE_ESTIMATORS:-dsg udsg cdsg eigenpro_rf rff_sgd} \
             ${SCALE_EXTRA:-} --out "$R" --tag "$TAG" ;;
    deformed) step deformed ${DEFORMED_LIMIT:-330} python3 benchmarks/gpu.py --sections deformed \
                --workdir /tmp --deformed-n ${DEFORMED_N:-1000000} --fashion .devdata/fashion-mnist \
                --scale-cap ${DEFORMED_CAP:-75} --estimators ${DEFORMED_ESTIMATORS:-dsg eigenpro_rf rff_sgd} \
                ${DEFORMED_EXTRA:-} --out "$R" --tag "$TAG" ;;
    huge) step huge ${HUGE_LIMIT:-560} python3 benchmarks/gpu.py --sections huge --workdir /tmp/huge \
            --n ${HUGE_N:-100000000} --n-test 100000 --estimators ${HUGE_ESTIMATOR:-dsg} \
            --budget-mb ${HUGE_BUDGET:-16384} --scale-cap ${HUGE_CAP:-480} \
            --segment-epochs ${HUGE_SEGMENT:-0.1} --out "$R" --tag "$TAG" ;;
    nystrom) step nystrom ${NYSTROM_LIMIT:-400} python3 benchmarks/gpu.py --sections scale \
               --n ${NYSTROM_N:-1000000} --n-test 100000 --estimators nystrom --scale-cap 300 \
               --out "$R" --tag "$TAG-nystrom" ;;  # FALKON-preconditioned CG on 10^6 x 20
    rff-batch) step rff-batch 120 python3 benchmarks/gpu.py --sections rff-batch --workdir /tmp/huge \
                 --rff-rows 2000000 --rff-cap 12 --out "$R" --tag "$TAG" ;;
    race) step race ${RACE_LIMIT:-420} python3 benchmarks/realdata.py --device gpu \
            --devdata .devdata --no-references --algorithms dsg udsg cdsg eigenpro eigenpro_rf \
            kernel_sgd rb_cg rff_sgd rff_svrg nystrom exact_krr pegasos norma --datasets ${RACE_DATASETS:-dev_twonorm \
            dev_ring dev_spambase dev_phoneme dev_page_blocks0 dev_satimage dev_texture \
            dev_penbased dev_elevators dev_pol dev_kin40k dev_protein} --time-cap ${RACE_CAP:-60} --tracking-uri none \
            --cache /tmp/realdata --out "$R" --tag "$TAG-race${RACE_SUFFIX:-}" ;;
    *) echo "unknown step $s"; exit 2 ;;
  esac
done
wait  # a background tests step
[ -f "$W/tests.log" ] && { echo "=== tests (background)"; tail -8 "$W/tests.log"; }
tar czf "$OUT/session.tgz" -C "$W" .
ls -la "$R"
