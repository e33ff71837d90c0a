"""The OpenCL GEMM tile, one layer at a time (issue 15): single Conv, ConvTranspose and GEMM
layers at the zoo's sizes (VGG-16, U-Net, ResNet-50, BERT-base) compiled with target="opencl"
under each configuration (by default the DNNF_OPENCL_TILE_FEATURES settings: all on, none, and
all but one; others force the tile's side, the K split, or no tiles), timed by OpenCL events
(CompiledModel.profile(), median of --repeat), beside PyTorch's own layer on --torch-device
(strict fp32 and TF32) where given. Every configuration's output is checked against the first.

    python benchmarks/opencl_tile_bench.py                            # the default OpenCL device
    python benchmarks/opencl_tile_bench.py --torch-device cuda --json out.json

GFLOP/s counts 2 flops per multiply-add of the layer's arithmetic.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import dnnfusion as df

# name: the environment it compiles under (features, forced tile side, forced K split)
CONFIGS = {
    "all": {"DNNF_OPENCL_TILE_FEATURES": "vec,prefetch,kfast_b,tap_major"},
    "none": {"DNNF_OPENCL_TILE_FEATURES": "none"},
    "no-vec": {"DNNF_OPENCL_TILE_FEATURES": "prefetch,kfast_b,tap_major"},
    "no-prefetch": {"DNNF_OPENCL_TILE_FEATURES": "vec,kfast_b,tap_major"},
    "no-kfast_b": {"DNNF_OPENCL_TILE_FEATURES": "vec,prefetch,tap_major"},
    "no-tap_major": {"DNNF_OPENCL_TILE_FEATURES": "vec,prefetch,kfast_b"},
    "t128": {"DNNF_OPENCL_TILING": "128"},
    "t64": {"DNNF_OPENCL_TILING": "64"},
    "t32": {"DNNF_OPENCL_TILING": "32"},
    "t128-k4": {"DNNF_OPENCL_TILING": "128", "DNNF_OPENCL_SPLIT_K": "4"},
    "t128-k16": {"DNNF_OPENCL_TILING": "128", "DNNF_OPENCL_SPLIT_K": "16"},
    "t64-k4": {"DNNF_OPENCL_TILING": "64", "DNNF_OPENCL_SPLIT_K": "4"},
    "untiled": {"DNNF_OPENCL_TILING": "0"},
}
FEATURE_CONFIGS = "all,none,no-vec,no-prefetch,no-kfast_b,no-tap_major"

# name: (kind, dims); conv: (C, M, H, W, kernel, stride, pad); gemm: (M, K, N, transB)
LAYERS = {
    "vgg conv 64->64 3x3 @224": ("conv", (64, 64, 224, 224, 3, 1, 1)),
    "vgg conv 256->256 3x3 @56": ("conv", (256, 256, 56, 56, 3, 1, 1)),
    "vgg conv 512->512 3x3 @14": ("conv", (512, 512, 14, 14, 3, 1, 1)),
    "unet conv 256->128 3x3 @128": ("conv", (256, 128, 128, 128, 3, 1, 1)),
    "unet conv 1024->512 3x3 @32": ("conv", (1024, 512, 32, 32, 3, 1, 1)),
    "unet conv 128->64 3x3 @256": ("conv", (128, 64, 256, 256, 3, 1, 1)),
    "unet up-conv 1024->512 2x2/2 @16": ("convt", (1024, 512, 16, 16, 2, 2, 0)),
    "unet up-conv 128->64 2x2/2 @128": ("convt", (128, 64, 128, 128, 2, 2, 0)),
    "resnet conv 256->64 1x1 @56": ("conv", (256, 64, 56, 56, 1, 1, 0)),
    "resnet stem 3->64 7x7/2 @224": ("conv", (3, 64, 224, 224, 7, 2, 3)),
    "bert ffn 128x768 x 768->3072 (W^T)": ("gemm", (128, 768, 3072, True)),
    "bert qkv 128x768 x 768x2304": ("gemm", (128, 768, 2304, False)),
    "gemm 1024^3": ("gemm", (1024, 1024, 1024, False)),
}


def layer(kind: str, d: tuple):
    """The layer as an ONNX model, its input, its flops and a PyTorch function computing it."""
    import onnx
    from onnx import TensorProto, helper as h, numpy_helper as nh

    rng = np.random.default_rng(0)
    if kind in ("conv", "convt"):
        C, M, H, W, k, s, p = d
        x = rng.standard_normal((1, C, H, W), dtype=np.float32)
        shape = (M, C, k, k) if kind == "conv" else (C, M, k, k)
        w = (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(C * k * k)).astype(np.float32)
        node = h.make_node("Conv" if kind == "conv" else "ConvTranspose", ["x", "w"], ["y"], kernel_shape=[k, k],
                           strides=[s, s], pads=[p] * 4)
        if kind == "conv":
            ho, wo = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
            flops = 2 * M * ho * wo * C * k * k
        else:
            ho, wo = (H - 1) * s - 2 * p + k, (W - 1) * s - 2 * p + k
            flops = 2 * M * H * W * C * k * k
        out = [1, M, ho, wo]

        def torch_fn(t, dev):
            xt, wt = t.from_numpy(x).to(dev), t.from_numpy(w).to(dev)
            if kind == "convt":
                return lambda: t.nn.functional.conv_transpose2d(xt, wt, stride=s, padding=p)
            return lambda: t.nn.functional.conv2d(xt, wt, stride=s, padding=p)
    else:
        Mr, K, N, tb = d
        x = rng.standard_normal((Mr, K), dtype=np.float32)
        w = (rng.standard_normal((N, K) if tb else (K, N), dtype=np.float32) / np.sqrt(K)).astype(np.float32)
        node = h.make_node("Gemm", ["x", "w"], ["y"], transB=1) if tb else h.make_node("MatMul", ["x", "w"], ["y"])
        flops = 2 * Mr * K * N
        out = [Mr, N]

        def torch_fn(t, dev):
            xt, wt = t.from_numpy(x).to(dev), t.from_numpy(w).to(dev)
            return (lambda: xt @ wt.T) if tb else (lambda: xt @ wt)
    g = h.make_graph([node], "layer", [h.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, out)], [nh.from_array(w, "w")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), x, flops, torch_fn


def torch_ms(fn, t, repeat: int) -> float:
    fn()
    t.cuda.synchronize()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        t.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--layers", default="", help="comma-separated substrings of layer names (default: all)")
    ap.add_argument("--configs", default=FEATURE_CONFIGS, help="comma-separated names from: " + ", ".join(CONFIGS))
    ap.add_argument("--torch-device", default="", help="e.g. cuda: PyTorch's layer beside (strict fp32 and TF32)")
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        if c not in CONFIGS:
            ap.error(f"unknown config {c!r}; choose from {', '.join(CONFIGS)}")
    names = [n for n in LAYERS if not args.layers or any(s in n for s in args.layers.split(","))]
    sel = [d for d in df.opencl_devices() if d["selected"]]
    print(f"OpenCL device: {sel[0]['name']} ({sel[0]['platform']}, {sel[0]['compute_units']} compute units)"
          if sel else "OpenCL device: none selected", flush=True)
    head = f"{'layer':<36} {'GFLOP':>6} " + " ".join(f"{c:>12}" for c in configs)
    if args.torch_device:
        head += f" {'torch fp32':>10} {'torch tf32':>10}"
    print("ms (GFLOP/s)\n" + head, flush=True)
    rows = []
    for name in names:
        kind, d = LAYERS[name]
        model, x, flops, torch_fn = layer(kind, d)
        row = {"layer": name, "gflop": flops / 1e9, "ms": {}}
        first = None
        for c in configs:
            saved = {k: os.environ.get(k) for k in CONFIGS[c]}
            os.environ.update(CONFIGS[c])
            try:
                m = df.compile(model, [x], target="opencl")
                y = m.run(x)[0]
                if first is None:
                    first = y
                err = float(np.max(np.abs(y - first)) / (np.max(np.abs(first)) + 1e-30))
                if err > 1e-4:
                    raise AssertionError(f"differs from {configs[0]!r} by {err:.2e}")
                prof = [r for r in m.profile(x, repeat=args.repeat).rows if r["block"] >= 0]
                row["ms"][c] = sum(r["ms"] for r in prof)
            except Exception as e:  # report and go on
                row["ms"][c] = None
                row.setdefault("errors", {})[c] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
                print(f"  {c}: {row['errors'][c]}", file=sys.stderr, flush=True)
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        if args.torch_device:
            import torch

            for key, tf32 in (("torch_fp32_ms", False), ("torch_tf32_ms", True)):
                torch.backends.cudnn.allow_tf32 = tf32
                torch.backends.cuda.matmul.allow_tf32 = tf32
                with torch.no_grad():
                    row[key] = torch_ms(torch_fn(torch, args.torch_device), torch, args.repeat)

        def cell(ms, width=12):
            return "-".rjust(width) if ms is None else f"{ms:.3f} ({flops / ms / 1e6:.0f})".rjust(width)

        line = f"{name:<36} {flops / 1e9:6.2f} " + " ".join(cell(row["ms"][c]) for c in configs)
        if args.torch_device:
            line += " " + cell(row["torch_fp32_ms"], 10) + " " + cell(row["torch_tf32_ms"], 10)
        print(line, flush=True)
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"configs": CONFIGS, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
