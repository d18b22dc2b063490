"""A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: the browser reads
commands on fd 3 and writes replies on fd 4, each a JSON message ended by a NUL byte). No driver package needed.

`open_page(html_path, screenshot)` loads a local page, waits for its load event (images included), and returns
what the page holds as the browser sees it: its title, tables (id, row count), images (resolved src, whether decoded),
links (resolved href) and element ids; it saves a PNG screenshot of the first VIEWPORT of the page.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
VIEWPORT = (1280, 1000)
PAGE_FACTS = """JSON.stringify({
  title: document.title,
  tables: [...document.querySelectorAll('table')].map(t => ({id: t.id, rows: t.rows.length})),
  images: [...document.images].map(i => ({src: i.src, ok: i.complete && i.naturalWidth > 0})),
  links: [...document.links].map(a => a.href),
  ids: [...document.querySelectorAll('[id]')].map(e => e.id),
})"""


def chromium() -> str | None:
    """The browser's path, or None where it is not installed."""
    return CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")


class _Pipe:
    def __init__(self, proc: subprocess.Popen, to_browser: int, from_browser: int):
        self.proc, self.out, self.inp = proc, to_browser, from_browser
        self.next_id, self.buffer, self.events = 0, b"", []

    def _read_message(self) -> dict:
        while b"\0" not in self.buffer:
            chunk = os.read(self.inp, 1 << 16)
            if not chunk:
                raise RuntimeError(f"chromium closed the DevTools pipe (exit code {self.proc.poll()})")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.out, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"DevTools {method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str) -> dict:
        """The next `method` event (blocks; a browser that exits ends the wait with an error)."""
        while True:
            for k, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(k)
            self.events.append(self._read_message())


def open_page(html_path: str | os.PathLike, screenshot: str | os.PathLike) -> dict:
    """Load `html_path` in headless Chromium; return the page's facts (see PAGE_FACTS) and save a screenshot."""
    url = Path(html_path).resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()

        def wire_fds():  # in the child: fd 3 reads our commands, fd 4 writes the replies
            high_r, high_w = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        proc = subprocess.Popen(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            preexec_fn=wire_fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(to_r)
        os.close(from_w)
        pipe = _Pipe(proc, to_w, from_r)
        try:
            target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            pipe.send("Emulation.setDeviceMetricsOverride", {"width": VIEWPORT[0], "height": VIEWPORT[1],
                                                             "deviceScaleFactor": 1, "mobile": False}, session)
            pipe.send("Page.enable", {}, session)
            pipe.send("Page.navigate", {"url": url}, session)
            pipe.wait_event("Page.loadEventFired")
            facts = json.loads(pipe.send("Runtime.evaluate", {"expression": PAGE_FACTS, "returnByValue": True},
                                         session)["result"]["value"])
            shot = pipe.send("Page.captureScreenshot", {"format": "png"}, session)["data"]
            Path(screenshot).write_bytes(base64.b64decode(shot))
            facts["url"] = url
            return facts
        finally:
            try:
                pipe.send("Browser.close")
            except (RuntimeError, OSError):
                proc.kill()
            proc.wait()
            os.close(to_w)
            os.close(from_r)
