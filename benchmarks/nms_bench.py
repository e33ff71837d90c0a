"""A detection model's post-processing, dnnfusion against ONNX Runtime in one process
(issue 17: models with NonMaxSuppression compile, the NMS and what follows it running on the
host, dnnfusion/host_tail.py).

The model: features [1, boxes, F] -> MatMul + Sigmoid to boxes [1, boxes, 4] and MatMul +
Transpose + Sigmoid to scores [1, classes, boxes] -> NonMaxSuppression (max 100 per class, IoU
0.45, score threshold 0.6) -> the kept boxes gathered. Defaults are SSD's sizes (1917 anchors,
21 classes). Random weights, built in code. Interleaved rounds, median of the per-round medians.

    python benchmarks/nms_bench.py
    python benchmarks/nms_bench.py --boxes 8400 --classes 80 --threads 1
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np


def model(boxes: int, classes: int, features: int) -> bytes:
    from onnx import TensorProto as T, helper as h, numpy_helper as nh

    rng = np.random.default_rng(0)
    nodes = [h.make_node("MatMul", ["x", "wb"], ["bb"]), h.make_node("Sigmoid", ["bb"], ["boxes"]),
             h.make_node("MatMul", ["x", "ws"], ["ss"]), h.make_node("Transpose", ["ss"], ["st"], perm=[0, 2, 1]),
             h.make_node("Sigmoid", ["st"], ["scores"]),
             h.make_node("NonMaxSuppression", ["boxes", "scores", "mx", "iou", "sth"], ["sel"]),
             h.make_node("Gather", ["sel", "two"], ["idx"], axis=1),
             h.make_node("Gather", ["boxes", "zero"], ["b0"], axis=0),
             h.make_node("Gather", ["b0", "idx"], ["kept"], axis=0)]
    inits = [nh.from_array((rng.standard_normal((features, 4)) * 0.5).astype(np.float32), "wb"),
             nh.from_array((rng.standard_normal((features, classes)) * 0.3).astype(np.float32), "ws"),
             nh.from_array(np.array([100], np.int64), "mx"), nh.from_array(np.array([0.45], np.float32), "iou"),
             nh.from_array(np.array([0.6], np.float32), "sth"), nh.from_array(np.array(2, np.int64), "two"),
             nh.from_array(np.array(0, np.int64), "zero")]
    g = h.make_graph(nodes, "postprocess", [h.make_tensor_value_info("x", T.FLOAT, [1, boxes, features])],
                     [h.make_tensor_value_info("kept", T.FLOAT, ["k", 4]),
                      h.make_tensor_value_info("sel", T.INT64, ["k", 3])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--boxes", type=int, default=1917)
    ap.add_argument("--classes", type=int, default=21)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()

    import onnxruntime as ort

    import dnnfusion as df

    b = model(args.boxes, args.classes, args.features)
    x = np.random.default_rng(1).standard_normal((1, args.boxes, args.features)).astype(np.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = args.threads, 1
    sess = ort.InferenceSession(b, so, providers=["CPUExecutionProvider"])
    cm = df.compile(b, example_inputs=[x], threads=args.threads)
    want, got = sess.run(None, {"x": x}), cm(x)
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, ISA {cm.stats['isa']}, "
          f"{args.threads} thread(s), OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')!r}")
    print(f"# {args.boxes} boxes x {args.classes} classes; kept rows: ort {want[1].shape[0]}, "
          f"dnnfusion {got[1].shape[0]}; host tail {cm.stats['host_tail']['ops']}")
    calls = {"ort": lambda: sess.run(None, {"x": x}), "dnnfusion": lambda: cm(x)}
    times: dict[str, list[float]] = {k: [] for k in calls}
    for r in range(args.rounds):
        for name in (list(calls) if r % 2 == 0 else list(calls)[::-1]):
            calls[name]()
            ts = []
            for _ in range(5):
                t0 = time.perf_counter()
                calls[name]()
                ts.append(time.perf_counter() - t0)
            times[name].append(float(np.median(ts)) * 1e3)
    for name, ts in times.items():
        print(f"{name:10s} {np.median(ts):8.3f} ms  [{np.percentile(ts, 25):.3f}-{np.percentile(ts, 75):.3f}]")


if __name__ == "__main__":
    main()
