"""Merges harness runs (benchmarks/run.py JSON files) into one set of tables.

Some frameworks cannot share a run with the others in reasonable time (untuned TVM takes
minutes per inference), so they are run on their own and merged here:

    python benchmarks/merge_results.py results/A.json results/B.json [--out DIR]

Cells are keyed by (model, framework, threads); a later file's cell replaces an earlier one
(so a re-run of one framework on one model overrides the old cell). Reference data (operator
counts) comes from the first file that has the model. The merged result records every source
file with its machine line, start time and git revision, and is written like a run's output
(`<stamp>-merged.json`, `-cells.csv`, `-counts.csv`, `-tables.txt`)."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import report  # noqa: E402


def _sources(r: dict, file: str) -> list[dict]:
    """The runs behind one input: itself, or, for a merged file, the runs it was merged from
    (so that merging a merged file again keeps every run's start time and revision)."""
    meta = r["meta"]
    if meta.get("merged_from"):
        return [dict(m, file=m.get("file") or f"{file} (merged)") for m in meta["merged_from"]]
    return [{"file": file, "started": meta.get("started"), "git": meta.get("git"),
             "cpu": (meta.get("cpu") or {}).get("model_name"),
             "frameworks": r["frameworks"], "threads": r["threads"]}]


def merge(results: list[dict], files: list[str] | None = None) -> dict:
    if not results:
        raise ValueError("nothing to merge")
    batches = {int(r["args"].get("batch") or 1) for r in results}
    if len(batches) > 1:
        raise ValueError(f"runs of different batch sizes {sorted(batches)} do not merge into one table")
    models: list[str] = []
    fws: list[str] = []
    threads: list[int] = []
    refs: dict = {}
    cells: dict[tuple, dict] = {}
    for r in results:
        for m in r["models"]:
            if m not in models:
                models.append(m)
        for f in r["frameworks"]:
            if f not in fws:
                fws.append(f)
        for t in r["threads"]:
            if t not in threads:
                threads.append(t)
        for m, ref in r["references"].items():
            refs.setdefault(m, ref)
        for c in r["cells"]:
            cells[(c.get("model"), c.get("framework"), c.get("threads"))] = c
    first = results[0]
    # The roofline of each thread count from the first run that measured it (the runs are
    # meant to come from one machine; its cells' "% of the bound" use this one).
    roof: dict = {}
    for r in results:
        for t, v in ((r["meta"].get("roofline") or {}).get("per_threads") or {}).items():
            roof.setdefault(t, v)
    return {
        "meta": {"merged_from": [m for i, r in enumerate(results)
                                 for m in _sources(r, files[i] if files else f"input {i + 1}")],
                 "cpu": first["meta"].get("cpu"), "versions": first["meta"].get("versions"),
                 "env": first["meta"].get("env"),
                 **({"roofline": {"per_threads": roof}} if roof else {})},
        "args": dict(first["args"], frameworks=",".join(fws),
                     threads=",".join(str(t) for t in sorted(threads))),
        "models": models, "frameworks": fws, "threads": sorted(threads),
        "references": refs, "cells": list(cells.values()),
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", help="run JSON files, earliest first")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    results = []
    for f in args.files:
        try:
            results.append(json.loads(Path(f).read_text()))
        except (OSError, ValueError) as e:
            raise SystemExit(f"cannot read {f}: {e}")
    merged = merge(results, args.files)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S") + "-merged"
    (out / f"{stamp}.json").write_text(json.dumps(merged, indent=1))
    report.write_cells_csv(out / f"{stamp}-cells.csv", merged)
    report.write_counts_csv(out / f"{stamp}-counts.csv", merged)
    text = "Merged from:\n" + "".join(
        f"  {m['file']}: started {m['started']}, git {m['git']}, frameworks {','.join(m['frameworks'])}, "
        f"threads {m['threads']}\n" for m in merged["meta"]["merged_from"]) + "\n"
    text += report.render(merged)
    (out / f"{stamp}-tables.txt").write_text(text)
    if not args.quiet:
        print(text)
    print(f"wrote {stamp}.json, -cells.csv, -counts.csv, -tables.txt in {out}")
    return merged


if __name__ == "__main__":
    main()
