"""The import cache: an ONNX file imported once is imported again in a fraction of the time.

Reading a large ONNX file is slow in Python: the protobuf parse copies every weight, and the
ONNX checker serializes the whole model once more (BERT-base: about 3 s of a 3.1 s warm
compile). The import cache keeps, per file, the imported ECG as its canonical text with the
large constants elided, and where each elided constant's bytes are: in the ONNX file itself
(an initializer's ``raw_data``, located by walking the protobuf wire format without parsing
the weights) or, for the few constants made at import, in a side file. A hit parses the text
and reads the weights with plain file reads.

A file is recognised by its resolved path, size, modification and change times, inode and
device, the way build tools recognise unchanged inputs. A file changed in the last 2 s is not
cached, so that two writes within one clock tick cannot share a key. The key also covers the
input shapes asked for, the dnnfusion version, the importer's source and the ``_core``
library. A model that was checked and imported before is therefore not checked again while
the file is unchanged.
Every located constant is compared with the file's bytes when the entry is written, so an
entry never points at bytes the importer did not take verbatim.

Not cached: models with external data (their data files could change unseen), big-endian
hosts. ``$DNNF_IMPORT_CACHE=0`` turns the cache off. Entries live in
``$DNNF_CACHE_DIR/imports`` (else ``$XDG_CACHE_HOME/dnnfusion/imports``, else
``~/.cache/dnnfusion/imports``), written atomically; a damaged entry is ignored and
rewritten."""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from dnnfusion import _core

FORMAT = 2  # 2: constants name their ECG element type (a NumPy dtype string is "<V1" for ml_dtypes' types)
# A file changed less than this long ago is not cached. File times advance in clock ticks
# (milliseconds), so a file rewritten twice within one tick, at the same size, would keep its
# key; a file that has been still for 2 s and then changes gets a new one ("racy git").
_SETTLE_NS = 2_000_000_000
_ELIDED_MIN = 17  # print_graph elides constants with more elements than 16 (text.cc)

# ONNX TensorProto fields (onnx.proto3): name = 8, raw_data = 9, data_location = 14.
# GraphProto.initializer = 5; ModelProto.graph = 7.
_WIRE_VARINT, _WIRE_I64, _WIRE_LEN, _WIRE_I32 = 0, 1, 2, 5


def enabled() -> bool:
    return os.environ.get("DNNF_IMPORT_CACHE", "1") != "0" and sys.byteorder == "little"


def cache_dir() -> Path:
    base = os.environ.get("DNNF_CACHE_DIR")
    if base:
        return Path(base) / "imports"
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg) if xdg else Path.home() / ".cache"
    return root / "dnnfusion" / "imports"


# ------------------------------------------------------------------------------------------
# Keys
# ------------------------------------------------------------------------------------------
_CODE_HASH: str | None = None


def _code_hash() -> str:
    """The importer's identity: its source files, the ``_core`` library it builds with, and the
    installed onnx (whose schemas give the function bodies onnx_functions.py imports)."""
    global _CODE_HASH
    if _CODE_HASH is None:
        from importlib import metadata

        h = hashlib.sha256()
        here = Path(__file__).resolve().parent
        for f in sorted(p.name for p in here.glob("onnx*.py")) + ["builder.py"]:  # every module import runs
            h.update((here / f).read_bytes())
        try:
            h.update(f"onnx {metadata.version('onnx')}".encode())
        except metadata.PackageNotFoundError:
            pass
        core = Path(_core.__file__)
        st = core.stat()
        h.update(f"{core.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode())
        _CODE_HASH = h.hexdigest()
    return _CODE_HASH


def key_for(path: str, input_shapes: Mapping[str, Sequence[Any]] | None) -> str | None:
    """The cache key of importing ``path`` with ``input_shapes``, or None if uncacheable."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
        import onnx

        onnx_version = onnx.__version__
    except (OSError, ImportError):
        return None
    from dnnfusion import __version__

    shapes = {k: [d if isinstance(d, (int, str)) or d is None else int(d) for d in v]
              for k, v in sorted((input_shapes or {}).items())}
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < _SETTLE_NS:
        return None  # written just now: a rewrite within the clock's granularity could hide
    ident = json.dumps({"format": FORMAT, "path": real, "size": st.st_size,
                        "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
                        "ino": st.st_ino, "dev": st.st_dev,
                        "shapes": shapes, "dnnfusion": __version__, "onnx": onnx_version,
                        "code": _code_hash()}, sort_keys=True)
    return hashlib.sha256(ident.encode()).hexdigest()[:32]


# ------------------------------------------------------------------------------------------
# Locating initializer bytes in the file (protobuf wire format)
# ------------------------------------------------------------------------------------------
class _Unsupported(Exception):
    """The file is laid out in a way the locator does not follow: do not cache."""


def _varint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= end or shift > 63:
            raise _Unsupported("bad varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: Any, start: int, end: int):
    """(field number, wire type, value start, value end or varint value) over a message."""
    pos = start
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        field, wire = tag >> 3, tag & 7
        if wire == _WIRE_VARINT:
            v, pos = _varint(buf, pos, end)
            yield field, wire, v, v
        elif wire == _WIRE_LEN:
            n, pos = _varint(buf, pos, end)
            if pos + n > end:
                raise _Unsupported("field runs past its message")
            yield field, wire, pos, pos + n
            pos += n
        elif wire == _WIRE_I64:
            pos += 8
        elif wire == _WIRE_I32:
            pos += 4
        else:
            raise _Unsupported(f"wire type {wire}")
    if pos != end:
        raise _Unsupported("message overruns")


def locate_raw_data(path: str) -> dict[str, tuple[int, int]]:
    """Initializer name -> (offset, length) of its ``raw_data`` in the file. Raises
    _Unsupported for external data or a layout it cannot follow."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        graphs = [(s, e) for fld, w, s, e in _fields(buf, 0, len(buf)) if fld == 7 and w == _WIRE_LEN]
        if len(graphs) != 1:
            raise _Unsupported("not exactly one graph field")
        found: dict[str, tuple[int, int]] = {}
        for fld, w, s, e in _fields(buf, *graphs[0]):
            if fld != 5 or w != _WIRE_LEN:
                continue
            name, raw = None, None
            for tf, tw, ts, te in _fields(buf, s, e):
                if tf == 8 and tw == _WIRE_LEN:
                    name = bytes(buf[ts:te]).decode("utf-8", "strict")
                elif tf == 9 and tw == _WIRE_LEN:
                    raw = (ts, te - ts)
                elif tf == 14 and tw == _WIRE_VARINT and ts == 1:
                    raise _Unsupported("external data")
            if name is None:
                continue
            if name in found:
                raise _Unsupported(f"initializer '{name}' appears twice")
            if raw is not None:
                found[name] = raw
        return found


# ------------------------------------------------------------------------------------------
# Reading and writing entries
# ------------------------------------------------------------------------------------------
def _read_into(f: Any, offset: int, target: np.ndarray | memoryview) -> None:
    f.seek(offset)
    view = target if isinstance(target, memoryview) else memoryview(target.reshape(-1).view(np.uint8))
    done = 0
    while done < len(view):  # an unbuffered read may return less than asked
        n = f.readinto(view[done:])
        if not n:
            raise OSError("short read")
        done += n


def _read_all(todo: list[tuple[str, Path, int, np.ndarray]]) -> None:
    """Fills the arrays from their files, on two threads, in pieces of at most 32 MiB (one
    huge weight, e.g. VGG-16's 411 MB classifier, is then split too): the time goes into
    first-touch page faults and copying, which the kernel does in parallel for parallel
    readers."""
    piece = 32 << 20
    jobs: list[tuple[Path, int, memoryview]] = []
    for _, file, offset, arr in todo:
        view = memoryview(arr.reshape(-1).view(np.uint8))
        for lo in range(0, arr.nbytes, piece):
            jobs.append((file, offset + lo, view[lo:lo + piece]))

    def work(part: list) -> None:
        files: dict[Path, Any] = {}
        try:
            for file, offset, view in part:
                if file not in files:
                    files[file] = open(file, "rb", buffering=0)
                _read_into(files[file], offset, view)
        finally:
            for f in files.values():
                f.close()

    if sum(len(j[2]) for j in jobs) < (64 << 20) or len(jobs) < 2:
        work(jobs)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as ex:
        for fut in [ex.submit(work, jobs[0::2]), ex.submit(work, jobs[1::2])]:
            fut.result()


def load(key: str, path: str) -> Any | None:
    """The cached ``_core.Graph`` for ``key``, or None (missing or damaged entry)."""
    d = cache_dir()
    meta_path = d / f"{key}.json"
    try:
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != FORMAT:
            return None
        text = (d / f"{key}.txt").read_text(encoding="utf-8")
        from dnnfusion.dtypes import numpy_dtype

        todo = [(name, d / f"{key}.bin" if where == "blob" else Path(path), offset,
                 np.empty(shape, dtype=numpy_dtype(dtype)))
                for name, where, offset, dtype, shape in meta["constants"]]
        _read_all(todo)
        return _core.parse_text(text, {name: arr for name, _, _, arr in todo})
    except Exception:  # noqa: BLE001 - any damage (I/O, JSON, text) is a miss, not an error
        return None


def store(key: str, path: str, graph: Any) -> bool:
    """Writes the entry for ``graph`` (imported from ``path``). False if it cannot be cached."""
    from dnnfusion.dtypes import numpy_dtype

    try:
        located = locate_raw_data(path)
    except (_Unsupported, OSError, UnicodeDecodeError, ValueError):
        return False
    entries: list[list[Any]] = []
    blob_parts: list[bytes] = []
    blob_size = 0
    with open(path, "rb") as f:
        for v in graph.constants:
            shape = [int(d) for d in v.shape]
            n = int(np.prod(shape, dtype=np.int64))
            if n < _ELIDED_MIN:
                continue  # printed inline
            data = np.ascontiguousarray(v.numpy())
            dtype = numpy_dtype(v.dtype)
            loc = located.get(v.name)
            if loc is not None and loc[1] == data.nbytes:
                on_disk = np.empty(shape, dtype=dtype)
                _read_into(f, loc[0], on_disk)
                if on_disk.view(np.uint8).tobytes() == data.view(np.uint8).tobytes():
                    entries.append([v.name, "model", loc[0], v.dtype, shape])
                    continue
            entries.append([v.name, "blob", blob_size, v.dtype, shape])
            blob_parts.append(data.view(np.uint8).tobytes())
            blob_size += data.nbytes
    text = graph.to_text(True)
    meta = {"format": FORMAT, "source": os.path.realpath(path), "constants": entries}
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        _atomic_write(d / f"{key}.bin", lambda f: [f.write(p) for p in blob_parts])
        _atomic_write(d / f"{key}.txt", lambda f: f.write(text.encode("utf-8")))
        # The metadata goes last: an entry exists once it is there.
        _atomic_write(d / f"{key}.json", lambda f: f.write(json.dumps(meta).encode()))
    except OSError:
        return False
    return True


def _atomic_write(dest: Path, write: Callable[[Any], Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
