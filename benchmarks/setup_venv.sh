#!/usr/bin/env bash
# Install the benchmark frameworks.
#
# Into the main environment (no conflicts with the project's pins): apache-tvm, openvino,
# MNN, ai-edge-litert.  Into a separate venv that sees the main environment's packages
# (--system-site-packages, so it uses the same torch 2.13.0): litert-torch (the PyTorch ->
# LiteRT converter) and executorch.  They go into a venv because litert-torch pins
# typing-extensions/pydantic below what other installed packages need, and executorch
# pulls in torchao, which transformers then imports (slow, noisy) in every process.
# The harness runs the litert and executorch cells with the venv's python.
#
#   bash benchmarks/setup_venv.sh            # venv at ~/.cache/dnnfusion/bench-venv
#   DNNF_BENCH_VENV=/path bash benchmarks/setup_venv.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${DNNF_BENCH_VENV:-$HOME/.cache/dnnfusion/bench-venv}
C=constraints.txt   # pins torch==2.13.0 (CPU build); never let pip change it

$PY -m pip install -q -c $C apache-tvm openvino MNN ai-edge-litert
if [ ! -x "$VENV/bin/python" ]; then
  $PY -m venv --system-site-packages "$VENV"
fi
"$VENV/bin/python" -m pip install -q -c $C litert-torch executorch
"$VENV/bin/python" -c "import torch, litert_torch, executorch; print('bench venv ok: torch', torch.__version__)"
