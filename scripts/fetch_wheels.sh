#!/usr/bin/env bash
# Download, on a machine with a package index, the wheels scripts/device_check.sh installs on the
# lent GPU machine, which has no network (its image: Python 3.12, torch with CUDA, typer, rich,
# numpy, scipy, scikit-learn, matplotlib; no pydantic, pydantic-core, annotated-types,
# typing-inspection, tomli-w: /work/.library/device/README.md and KINDS.md).
#
#   bash scripts/fetch_wheels.sh            # into wheels/ (git-ignored), then carry "wheels"
#
# Versions are pinned to the ones this checkout is tested with (pydantic pins its pydantic-core
# exactly: two versions of one package would stop the install there). --no-deps: every needed
# package is named here; the image has the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${DEST:-wheels}
PY=${PYTHON:-python3}
mkdir -p "$DEST"
"$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$DEST" pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
  tomli-w==1.2.0
ls -l "$DEST"
