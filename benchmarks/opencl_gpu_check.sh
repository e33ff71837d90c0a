#!/usr/bin/env bash
# The zoo through compile(model, target="opencl") on a lent GPU machine (issue 15, part 6):
# correctness against PyTorch and per-model latency beside PyTorch eager on the same GPU.
# Run from the repository root on a machine with an NVIDIA driver and no network:
#   the OpenCL ICD loader comes as Debian packages carried in .ocl/ (apt-get download
#   ocl-icd-libopencl1 clinfo), NVIDIA's OpenCL driver (libnvidia-opencl.so.1) is found on the
#   machine, dnnfusion is built there (python3 with torch, onnx, onnxruntime, pybind11 and
#   scikit-build-core already installed). Results go to $OUT (default ./gpu_out).
# Knobs: REDUCED_MODELS, FULL_MODELS, and time limits REDUCED_S (0: skip the reduced models),
# FULL_S, UNTILED_S (0: skip the pass with DNNF_OPENCL_TILING=0), TILE64_S (0: skip the pass
# with 64-wide tiles forced, DNNF_OPENCL_TILING=64, over TILE64_MODELS), TOP (each full model's
# slowest kernels printed, default 3), ALT_ENV, ALT_S and ALT_MODELS (a last pass over ALT_MODELS
# with the environment assignment ALT_ENV, e.g. DNNF_OPENCL_SPLIT_K=1, skipped unless ALT_S > 0;
# ALT_REDUCED=1: over the reduced models),
# TILE_BENCH_S (first, benchmarks/opencl_tile_bench.py: the tile's features layer by layer;
# skipped unless > 0; TILE_BENCH_ARGS adds its arguments, e.g. --configs all,t128,t64). The runs of 2026-11-25: the first (committed results, before
# the tiles) with the defaults; the second, lost when the machine stopped answering, with
#   REDUCED_MODELS=faster_rcnn,mask_rcnn,s3d,c3d,resnet50 REDUCED_S=70 FULL_S=160 UNTILED_S=110
set -u
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
t0=$(date +%s)
stamp() { echo "== $(( $(date +%s) - t0 )) s: $*"; }
stamp "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
lscpu | grep -E "Model name|^CPU\(s\)"
python3 -c "import torch, onnx, onnxruntime; print('torch', torch.__version__, 'onnx', onnx.__version__, 'ort', onnxruntime.__version__)"
ls /etc/OpenCL/vendors 2>&1
drv=$(find /usr/lib /usr/lib64 /usr/local /lib /opt -name 'libnvidia-opencl.so*' 2>/dev/null | sort | head -1)
echo "NVIDIA OpenCL driver: ${drv:-none found}"
mkdir -p /tmp/ocl /tmp/ocl/vendors
for f in .ocl/*.deb; do dpkg -x "$f" /tmp/ocl; done
[ -n "$drv" ] && echo "$drv" > /tmp/ocl/vendors/nvidia.icd
for f in /etc/OpenCL/vendors/*.icd; do [ -f "$f" ] && cp "$f" /tmp/ocl/vendors/; done
export OCL_ICD_VENDORS=/tmp/ocl/vendors
export DNNF_OPENCL_LIBRARY=/tmp/ocl/usr/lib/x86_64-linux-gnu/libOpenCL.so.1
export LD_LIBRARY_PATH=/tmp/ocl/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
/tmp/ocl/usr/bin/clinfo -l 2>&1 | head -20
stamp "build"
python3 -m pip install -q --no-build-isolation --no-deps --no-index -e . 2>&1 | tail -5
stamp "devices"
python3 -m dnnfusion info --devices || exit 1
export PYTHONUNBUFFERED=1
if [ "${TILE_BENCH_S:-0}" -gt 0 ]; then
  stamp "GEMM tile features, one layer at a time"
  timeout $TILE_BENCH_S python3 benchmarks/opencl_tile_bench.py --torch-device cuda --json "$OUT/tile_bench.json" ${TILE_BENCH_ARGS:-}
fi
if [ "${REDUCED_S:-150}" -gt 0 ]; then
stamp "reduced zoo"
timeout ${REDUCED_S:-150} python3 benchmarks/opencl_table.py --no-cpu --torch-device cuda --repeat 5 \
    --models "${REDUCED_MODELS:-$(python3 -c 'from dnnfusion.zoo import registry; print(",".join(registry.list()))')}" \
    --json "$OUT/reduced.json"
fi
FULL=${FULL_MODELS:-resnet50,bert_base,gpt2,mobilenetv2,efficientnet_b0,vgg16,distilbert,vit_b16,yolov4,unet}
stamp "full models"
timeout ${FULL_S:-200} python3 benchmarks/opencl_table.py --full --no-cpu --torch-device cuda --repeat 10 \
    --top ${TOP:-3} --models "$FULL" --json "$OUT/full.json"
if [ "${UNTILED_S:-0}" -gt 0 ]; then
  stamp "full models, GEMM tiles and row work-groups off (DNNF_OPENCL_TILING=0)"
  DNNF_OPENCL_TILING=0 timeout $UNTILED_S python3 benchmarks/opencl_table.py --full --no-cpu --repeat 10 \
      --models "$FULL" --json "$OUT/full_untiled.json"
fi
if [ "${TILE64_S:-0}" -gt 0 ]; then
  stamp "full models, 64-wide GEMM tiles forced (DNNF_OPENCL_TILING=64)"
  DNNF_OPENCL_TILING=64 timeout $TILE64_S python3 benchmarks/opencl_table.py --full --no-cpu --repeat 10 \
      --models "${TILE64_MODELS:-$FULL}" --json "$OUT/full_tile64.json"
fi
if [ "${ALT_S:-0}" -gt 0 ]; then
  alt_size=full; [ "${ALT_REDUCED:-0}" = 1 ] && alt_size=reduced
  stamp "$alt_size models with ${ALT_ENV}"
  env ${ALT_ENV} timeout $ALT_S python3 benchmarks/opencl_table.py $([ $alt_size = full ] && echo --full) --no-cpu --repeat 10 \
      --models "${ALT_MODELS:-$FULL}" --json "$OUT/${alt_size}_alt.json"
fi
stamp "done"
