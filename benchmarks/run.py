#!/usr/bin/env python3
"""Run the cross-framework comparison: ``python benchmarks/run.py [--models a,b] [--reduced] ...``

See benchmarks/README.md for what is measured and how each number is defined.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from harness.runner import main  # noqa: E402

if __name__ == "__main__":
    main()
