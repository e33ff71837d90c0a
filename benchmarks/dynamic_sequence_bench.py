"""A runtime sequence length three ways (issue 17): a specialization per length (compile's
default for a dynamic ONNX file), ``dynamic=True`` (one program for the longest length, shorter
ones padded and masked, dnnfusion/sequence.py) and ``dynamic=True, sequence_buckets=True``
(programs for half, a quarter, ... of it, compiled on first use), beside ONNX Runtime on the
same dynamic file. Full-size zoo models, batch 1, median of 7 calls after the first; "first s"
is the first call at a length (a compile included when it needs one).

    python3 benchmarks/dynamic_sequence_bench.py [models...] [--threads 2] [--lengths 128,96,64,32,16]
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np


def _compiles(m) -> int:
    seq = m.stats.get("dynamic", {}).get("sequence", {})
    return len(m.stats.get("specializations", [])) + seq.get("compiles", 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", default=["bert_base", "gpt2"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lengths", default="128,96,64,32,16")
    args = ap.parse_args()
    import onnxruntime as ort

    import dnnfusion as df
    from dnnfusion import _core
    from dnnfusion.zoo import registry
    from dnnfusion.zoo.dynamic_check import _median_ms, _resize

    lengths = [int(s) for s in args.lengths.split(",")]
    print(f"# {platform.processor() or platform.machine()}, isa {_core.cpu_features()['isa']}, "
          f"{args.threads} threads, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '-')}, "
          f"onnxruntime {ort.__version__}", flush=True)
    print(f"{'model':<10} {'mode':<22} {'seq':>4} {'first s':>8} {'ms':>8} {'ORT ms':>8} {'compiles':>8} "
          f"{'rel vs ORT':>10}", flush=True)
    for name in args.models:
        path = str(registry.export_onnx(name, dynamic=True))
        zm = registry.get(name)
        examples = [x.numpy() for x in zm.example_inputs]
        longest = [_resize(x, 1, lengths[0] if x.ndim == 2 else None) for x in examples]
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        for mode, kw in (("specialization", {}), ("dynamic=True", {"dynamic": True}),
                         ("dynamic=True, buckets", {"dynamic": True, "sequence_buckets": True})):
            m = df.compile(path, longest, threads=args.threads, **kw)
            for s in lengths:
                feeds = [_resize(x, 1, s if x.ndim == 2 else None) for x in examples]
                t = time.perf_counter()
                got = m.run(*feeds)
                first = time.perf_counter() - t
                ms = _median_ms(lambda: m.run(*feeds), 7)  # noqa: B023 (called at once)
                want = sess.run(None, dict(zip(names, feeds)))
                ort_ms = _median_ms(lambda: sess.run(None, dict(zip(names, feeds))), 7)
                rel = max(float(np.abs(g - w).max() / max(np.abs(w).max(), 1e-30)) for g, w in zip(got, want))
                print(f"{name:<10} {mode:<22} {s:>4} {first:>8.2f} {ms:>8.2f} {ort_ms:>8.2f} {_compiles(m):>8} "
                      f"{rel:>10.1e}", flush=True)


if __name__ == "__main__":
    main()
