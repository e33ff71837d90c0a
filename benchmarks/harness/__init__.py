"""Cross-framework comparison harness for dnnfusion.

``python benchmarks/run.py`` (see ``benchmarks/README.md``) measures, for every model and
every framework, the operator count before fusion, the kernel count after fusion, latency
with 1 and 2 threads, peak memory, compile time and correctness against PyTorch eager.
Every (model, framework, threads) cell runs in its own subprocess (``harness.cell``).
"""
