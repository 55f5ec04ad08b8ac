#!/usr/bin/env bash
# Wheels the lent GPU machine lacks (its image has numpy, scipy, scikit-learn, cupy, ... but no
# package registry): cp312 manylinux builds of the versions pinned in requirements.lock, into
# .whl/ (git-excluded). Then: run `bash benchmarks/gpu_session.sh ...` with .whl (and .devdata, a
# copy of ../shared/devdata, for the race) carried.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -q '^/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
grep -q '^/.devdata/' .git/info/exclude 2>/dev/null || echo /.devdata/ >> .git/info/exclude
[ -d .devdata ] || cp -r ../shared/devdata .devdata 2>/dev/null || echo "no ../shared/devdata: the race step will fail"
pins=()
for p in zarr numcodecs dask donfig google-crc32c partd locket pooch platformdirs jsonschema \
         jsonschema-specifications referencing rpds-py; do
  v=$(grep -i "^${p}==" requirements.lock | head -1 | cut -d= -f3)
  [ -n "$v" ] || { echo "gpu_wheels: $p is not pinned in requirements.lock" >&2; exit 1; }
  pins+=("$p==$v")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "${pins[@]}"
ls .whl
