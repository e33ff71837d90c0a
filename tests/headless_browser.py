"""Loads a page in headless Chromium (Debian's `chromium`) through the DevTools protocol over a
pipe (--remote-debugging-pipe: no websocket library needed) and reports its console errors,
failed loads and broken images; optionally saves a screenshot.

    python tests/headless_browser.py report.html notebooks/figures/report.png
"""
from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Every image: whether it loaded and its natural size (0 for a broken one).
_IMAGES = "JSON.stringify([...document.images].map(i => [i.alt, i.complete, i.naturalWidth, i.naturalHeight]))"


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class _Cdp:
    """A DevTools client over Chromium's pipe: NUL-terminated JSON messages on fds 3 and 4."""

    def __init__(self, exe: str, profile_dir: str):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds() -> None:  # in the child: the pipes become fds 3 (read) and 4 (write)
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", f"--user-data-dir={profile_dir}",
             "--allow-file-access-from-files", "about:blank"],
            preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._next = 0
        self.events: list[dict] = []

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            # select, so that a browser that hangs fails the test instead of blocking it.
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buf += chunk
        msg, _, self._buf = self._buf.partition(b"\0")
        return json.loads(msg)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60.0) -> dict:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self._next:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            m = self._read(deadline)
            if m.get("method") == method:
                return m
            self.events.append(m)

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)


def load_page(path: str | os.PathLike, screenshot: str | os.PathLike | None = None,
              width: int = 1200) -> dict:
    """Opens `path` and returns {"errors": [...], "images": [[alt, complete, w, h], ...],
    "title": ...}; errors are console errors, uncaught exceptions and browser log errors
    (failed loads, blocked content)."""
    exe = chromium()
    if exe is None:
        raise FileNotFoundError("no chromium on PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        cdp = _Cdp(exe, profile)
        try:
            target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            s = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                cdp.call(f"{domain}.enable", session=s)
            cdp.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900,
                     "deviceScaleFactor": 1, "mobile": False}, session=s)
            cdp.call("Page.navigate", {"url": Path(path).resolve().as_uri()}, session=s)
            cdp.wait_event("Page.loadEventFired")
            images = json.loads(cdp.call("Runtime.evaluate", {"expression": _IMAGES,
                                         "returnByValue": True}, session=s)["result"]["value"])
            title = cdp.call("Runtime.evaluate", {"expression": "document.title", "returnByValue": True},
                             session=s)["result"]["value"]
            if screenshot is not None:
                shot = cdp.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False},
                                session=s)
                Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
        finally:
            cdp.close()
    errors = []
    for e in cdp.events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"]))
        elif m == "Runtime.exceptionThrown":
            errors.append("exception: " + p["exceptionDetails"].get("text", ""))
        elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
            errors.append(f"log ({p['entry']['source']}): {p['entry']['text']}")
    return {"errors": errors, "images": images, "title": title}


if __name__ == "__main__":
    out = load_page(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
    print(json.dumps(out, indent=1))
    sys.exit(1 if out["errors"] or any(not ok or w == 0 for _, ok, w, _ in out["images"]) else 0)
