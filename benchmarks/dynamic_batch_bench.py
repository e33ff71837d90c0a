"""compile(..., dynamic=True) at batch 8 (issue 17): the program compiled for a representative
batch of 1 run over 8 chunks, the one compiled for 8 run once, and ONNX Runtime on the same
dynamic ONNX file; full-size zoo models, 2 threads, median of 5 calls after the first.

    python3 benchmarks/dynamic_batch_bench.py [models...]   # default: resnet50 mobilenetv2
"""
from __future__ import annotations

import sys

import numpy as np


def main(names: list[str]) -> None:
    import onnxruntime as ort

    import dnnfusion as df
    from dnnfusion.zoo import registry
    from dnnfusion.zoo.dynamic_check import _median_ms

    for name in names or ["resnet50", "mobilenetv2"]:
        path = str(registry.export_onnx(name, dynamic=True))
        zm = registry.get(name)
        x8 = np.concatenate([x.numpy() for x in zm.example_inputs[:1]] * 8)
        so = ort.SessionOptions()
        so.intra_op_num_threads = 2
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        feed = {sess.get_inputs()[0].name: x8}
        ref = sess.run(None, feed)[0]  # also ONNX Runtime's warm-up
        for tag, examples in (("representative batch 1", None), ("representative batch 8", [x8])):
            m = df.compile(path, examples, dynamic=True, threads=2)
            out = m(x8)
            out = out[0] if isinstance(out, (list, tuple)) else out  # the first output, as `ref`
            err = float(np.abs(out - ref).max() / np.abs(ref).max())
            print(f"{name} batch 8, dynamic=True, {tag}: {_median_ms(lambda: m(x8)):.1f} ms "
                  f"(rel err vs ORT {err:.1e})", flush=True)
        print(f"{name} batch 8, ONNX Runtime: {_median_ms(lambda: sess.run(None, feed)):.1f} ms", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
