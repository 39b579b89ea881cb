#!/usr/bin/env bash
# Build the Python policy PodAgeOnHotNodes (app.py) into a WebAssembly component.
#
#   policies-wasm/example-python/build.sh [OUTPUT.wasm]
#
# OUTPUT defaults to ${CARGO_TARGET_DIR:-<repository>/target}/python-policies/example_python.wasm.
# Needs componentize-py (from PyPI; the version CI uses is pinned in
# .ci/python-policy-requirements.txt): $COMPONENTIZE_PY if set, else `componentize-py` on PATH.
#
#   python3 -m venv ~/.venvs/componentize && ~/.venvs/componentize/bin/pip install \
#       -r .ci/python-policy-requirements.txt
#   COMPONENTIZE_PY=~/.venvs/componentize/bin/componentize-py policies-wasm/example-python/build.sh
#
# What it runs: componentize-py against the ABI's WIT (policy-sdk/wit, world `policy`) with
# --stub-wasi: CPython's own WASI imports (files, clocks, randomness, sockets, stdio) are
# replaced by stubs that trap inside the component, so the component imports only
# rebalancer:policy — exactly what the sandbox provides. The interpreter is initialised at
# build time (app.py and what it imports are loaded then), so a run starts in milliseconds.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUTPUT="${1:-${CARGO_TARGET_DIR:-$ROOT/target}/python-policies/example_python.wasm}"
COMPONENTIZE_PY="${COMPONENTIZE_PY:-componentize-py}"

if ! command -v "$COMPONENTIZE_PY" >/dev/null 2>&1; then
    echo "build.sh: componentize-py not found (set COMPONENTIZE_PY or put it on PATH);" \
        "install it with: pip install -r $ROOT/.ci/python-policy-requirements.txt" >&2
    exit 1
fi
pinned=$(sed -n 's/^componentize-py==\(.*\)$/\1/p' "$ROOT/.ci/python-policy-requirements.txt")
installed=$("$COMPONENTIZE_PY" --version | awk '{print $2}')
if [[ "$installed" != "$pinned" ]]; then
    echo "build.sh: warning: componentize-py $installed, this repository is tested with $pinned" >&2
fi

mkdir -p "$(dirname "$OUTPUT")"
# Written beside the output and renamed into place: an interrupted build leaves no half file.
partial="$OUTPUT.partial"
PYTHONDONTWRITEBYTECODE=1 "$COMPONENTIZE_PY" --quiet -d "$ROOT/policy-sdk/wit" -w policy \
    componentize --stub-wasi -p "$HERE" app -o "$partial"
mv "$partial" "$OUTPUT"
echo "$OUTPUT: $(wc -c <"$OUTPUT") bytes (componentize-py $installed)"
