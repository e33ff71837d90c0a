"""The depthwise convolutions of MobileNetV1-SSD and MobileNetV2 as each framework runs them
inside a model: dnnfusion's channels-last kernel (its per-kernel profile) beside ONNX
Runtime's (its profiler's per-node times; it runs them in its blocked NCHWc layout).

Each layer is a small ONNX model, 1x1 conv -> ReLU -> depthwise 3x3 (bias) -> ReLU -> 1x1
conv, so both frameworks see the depthwise convolution between two others, with its input
fresh from the first (as in the networks). Rounds alternate the two frameworks; each cell is
the median over rounds of the per-round median of the depthwise kernel's time.

    python benchmarks/depthwise_bench.py --threads 1 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

import numpy as np

SHAPES = [  # C, H, W, stride: SSD's (300x300 input) and MobileNetV2's (224x224) depthwise layers
    (32, 150, 150, 1), (64, 150, 150, 2), (128, 75, 75, 1), (128, 75, 75, 2), (256, 38, 38, 1),
    (256, 38, 38, 2), (512, 19, 19, 1), (512, 19, 19, 2), (1024, 10, 10, 1),
    (96, 112, 112, 2), (144, 56, 56, 1), (192, 28, 28, 1), (384, 14, 14, 1), (960, 7, 7, 1),
]


def model(C: int, H: int, W: int, s: int, path: str) -> None:
    import onnx
    from onnx import helper as h, numpy_helper as nh

    rng = np.random.default_rng(0)
    f = lambda *shape: (0.1 * rng.standard_normal(shape)).astype(np.float32)  # noqa: E731
    nodes = [h.make_node("Conv", ["x", "w1"], ["a"]), h.make_node("Relu", ["a"], ["b"]),
             h.make_node("Conv", ["b", "wd", "bd"], ["c"], group=C, kernel_shape=[3, 3], pads=[1] * 4,
                         strides=[s, s], name="dw"),
             h.make_node("Relu", ["c"], ["d"]), h.make_node("Conv", ["d", "w2"], ["y"])]
    g = h.make_graph(nodes, "dw", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, C, H, W])],
                     [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                     [nh.from_array(f(C, C, 1, 1), "w1"), nh.from_array(f(C, 1, 3, 3), "wd"),
                      nh.from_array(f(C), "bd"), nh.from_array(f(C, C, 1, 1), "w2")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def dnnf_ms(cm, x: np.ndarray, C: int) -> float:
    rows = [r for r in cm.profile(x, repeat=20, warmup=2).rows if any(f" g{C}" in s for s in r["stages"])]
    return rows[0]["ms"]


def ort_ms(sess, x: np.ndarray, runs: int = 40) -> float:
    for _ in range(runs):
        sess.run(None, {"x": x})
    prof = sess.end_profiling()
    with open(prof) as f:
        ev = json.load(f)
    os.unlink(prof)
    t = [e["dur"] / 1e3 for e in ev if e.get("cat") == "Node" and e.get("args", {}).get("op_name") == "Conv"
         and e["name"].startswith("d_") and e["name"].endswith("_kernel_time")]
    return statistics.median(t[5:])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)
    import onnxruntime as ort

    import dnnfusion as df
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from harness.frameworks import ort_options
    from harness.machine import cpu_info

    cpu = cpu_info()
    print(f"machine: {cpu['model_name']} (family {cpu.get('cpu_family')} model {cpu.get('model')}), "
          f"{cpu['logical_cpus']} CPUs, isa {df._core.cpu_features()['isa']}, "
          f"threads {a.threads}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}, "
          f"onnxruntime {ort.__version__}")
    print(f"{'layer':>22}  {'dnnfusion ms':>12}  {'ORT ms':>8}  {'ratio':>6}  dnnfusion kernel")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for C, H, W, s in SHAPES:
            path = os.path.join(tmp, f"dw{C}_{H}_{s}.onnx")
            model(C, H, W, s, path)
            x = np.random.default_rng(1).random((1, C, H, W), dtype=np.float32)
            cm = df.compile(path, threads=a.threads, layout="nhwc", profile="off")
            ours, theirs = [], []
            for r in range(a.rounds):
                o = ort_options(ort, a.threads)
                o.enable_profiling = True
                o.profile_file_prefix = os.path.join(tmp, "ort")
                sess = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
                if r % 2:
                    theirs.append(ort_ms(sess, x))
                    ours.append(dnnf_ms(cm, x, C))
                else:
                    ours.append(dnnf_ms(cm, x, C))
                    theirs.append(ort_ms(sess, x))
            d, o_ = statistics.median(ours), statistics.median(theirs)
            ratios.append(d / o_)
            stage = [st for k in cm.kernels for st in k["stages"] if f" g{C}" in st][0]
            print(f"{f'{C}ch {H}x{W} s{s}':>22}  {d:12.4f}  {o_:8.4f}  {d / o_:6.2f}  {stage}", flush=True)
    print(f"geomean dnnfusion / ORT: {float(np.exp(np.mean(np.log(ratios)))):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
