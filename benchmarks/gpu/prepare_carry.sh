#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Fills .carry/ (ignored by git) with what the GPU machines lack and
# benchmarks/gpu/run.sh needs: GoogleTest's sources and Gloo's headers, both
# from this machine's Debian packages. Pass `.carry` in the device tool's
# carry list.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
"$ROOT/scripts/setup.sh" >/dev/null
[ -d /usr/src/googletest ] || { echo "install Debian's googletest package first" >&2; exit 1; }
rm -rf "$ROOT/.carry"
mkdir -p "$ROOT/.carry/gloo-include"
cp -r /usr/src/googletest "$ROOT/.carry/googletest"
cp -r /usr/include/gloo "$ROOT/.carry/gloo-include/"
du -sh "$ROOT/.carry"
