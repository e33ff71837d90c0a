"""`python -m dnnfusion report`: one self-contained HTML page (pictures as data: URIs, no script,
no network, model-supplied names escaped), opened in headless Chromium, which must show every
image and log no error."""
from __future__ import annotations

import base64
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("matplotlib")

from dnnfusion import cli  # noqa: E402

from headless_browser import chromium, load_page  # noqa: E402

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _hostile_model(path: Path) -> None:
    """Relu then Add, with names a browser would run if they reached the page unescaped."""
    h, T = onnx.helper, onnx.TensorProto
    x = h.make_tensor_value_info("x" + HOSTILE, T.FLOAT, [2, 8])
    y = h.make_tensor_value_info("y" + HOSTILE, T.FLOAT, [2, 8])
    nodes = [h.make_node("Relu", ["x" + HOSTILE], ["t" + HOSTILE], name="relu" + HOSTILE),
             h.make_node("Add", ["t" + HOSTILE, "x" + HOSTILE], ["y" + HOSTILE], name="add" + HOSTILE)]
    model = h.make_model(h.make_graph(nodes, "g" + HOSTILE, [x], [y]),
                         opset_imports=[h.make_opsetid("", 17)])
    onnx.save(model, str(path))


def _check_self_contained(page: str) -> list[dict]:
    p = _Tags()
    p.feed(page)
    tags = {t for t, _ in p.tags}
    assert not tags & {"script", "iframe", "object", "embed", "link", "svg"}, tags
    assert all(not k.startswith("on") for _, attrs in p.tags for k in attrs)
    imgs = [a for t, a in p.tags if t == "img"]
    for a in imgs:
        prefix = "data:image/svg+xml;base64,"
        assert a["src"].startswith(prefix)
        ET.fromstring(base64.b64decode(a["src"][len(prefix):]))  # well-formed SVG
    return imgs


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    _hostile_model(d / "hostile.onnx")
    out = d / "hostile.html"
    assert cli.main(["report", str(d / "hostile.onnx"), "-o", str(out), "--repeat", "2", "--threads", "1"]) == 0
    return out


@pytest.fixture(scope="module")
def zoo_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "mobilenetv2.html"
    assert cli.main(["report", "mobilenetv2", "--reduced", "-o", str(out), "--repeat", "2", "--threads", "1"]) == 0
    return out


def test_model_names_are_escaped(hostile_report):
    page = hostile_report.read_text()
    imgs = _check_self_contained(page)
    assert len(imgs) == 2  # the plan and the kernel profile
    assert "&lt;script&gt;" in page  # the names are there, escaped (explain(), the profile table)
    assert "<script" not in page.lower() and "<img src=x" not in page  # only as escaped text
    assert "vs ONNX Runtime: max abs diff" in page


def test_zoo_report_has_every_section(zoo_report):
    page = zoo_report.read_text()
    _check_self_contained(page)
    for section in ("Summary", "Correctness", "Latency", "Fusion plan", "Per-kernel profile", "Why pairs were fused"):
        assert f"<h2>{section}" in page
    for fw in ("dnnfusion", "PyTorch eager", "ONNX Runtime"):
        assert f"<td>{fw}</td>" in page
    assert "mobilenetv2 (reduced)" in page


@pytest.mark.skipif(chromium() is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_browser_checker_catches_errors_and_broken_images(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><title>bad</title><img alt="broken" src="data:image/png;base64,AAAA">'
                   '<script>console.error("boom")</script>')
    out = load_page(bad)
    assert out["errors"] == ["console: boom"]
    assert out["images"] == [["broken", True, 0, 0]]


@pytest.mark.skipif(chromium() is None, reason="needs Debian's chromium (.ci/run installs it)")
@pytest.mark.parametrize("which", ["zoo_report", "hostile_report"])
def test_report_loads_in_chromium(which, request, tmp_path):
    report = request.getfixturevalue(which)
    out = load_page(report, screenshot=tmp_path / "shot.png")
    assert out["errors"] == []
    assert len(out["images"]) == 2 and all(ok and w > 0 and h > 0 for _, ok, w, h in out["images"])
    assert out["title"].startswith("dnnfusion report: ")
    assert (tmp_path / "shot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if which == "hostile_report":  # the page's own title, not one a model's name injected
        assert out["title"] == f"dnnfusion report: {report.with_suffix('.onnx')}"
