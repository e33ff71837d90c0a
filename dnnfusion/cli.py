"""Command line: ``python -m dnnfusion <command> [model]``. With no model, commands use the
built-in network (``dnnfusion.builtin.tiny_convnet``)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from dnnfusion.ecg import ECG, load
from dnnfusion.errors import Error


def _parse_shapes(items: list[str]) -> dict[str, list[int]] | None:
    if not items:
        return None
    shapes = {}
    for item in items:
        name, _, dims = item.partition("=")
        if not dims:
            raise SystemExit(f"--input-shape expects NAME=D0,D1,..., got {item!r}")
        shapes[name] = [int(d) for d in dims.split(",")]
    return shapes


def load_model(spec: str | None, input_shapes: dict | None = None) -> ECG:
    """A model spec: nothing (the built-in network), a path to an .onnx file, or the name
    of a zoo model (needs torch)."""
    if spec is None:
        from dnnfusion.builtin import tiny_convnet

        return tiny_convnet()
    if os.path.exists(spec) or spec.endswith(".onnx"):
        return load(spec, input_shapes=input_shapes)
    try:
        from dnnfusion import zoo
    except ImportError as e:  # the zoo needs torch
        raise SystemExit(f"{spec!r} is not a file, and the model zoo is unavailable: {e}")
    z = zoo.get(spec)
    return load(z.module, z.example_inputs)


def cmd_info(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    g = load_model(args.model, _parse_shapes(args.input_shape))
    elapsed = time.perf_counter() - t0
    g.verify()
    print(g.summary())
    print(f"  imported and verified in {elapsed:.2f} s")
    if args.text:
        print()
        print(g.to_text(elide_constants=True))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="dnnfusion", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="import a model and print its operator summary")
    info.add_argument("model", nargs="?", help="an .onnx file or a zoo model name "
                      "(default: the built-in network)")
    info.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                      help="specialize a symbolic ONNX input shape")
    info.add_argument("--text", action="store_true", help="also print the ECG text form")
    info.set_defaults(func=cmd_info)
    args = p.parse_args(argv)
    try:
        return args.func(args)
    except Error as e:
        print(f"dnnfusion: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
