"""A headless Chromium page driven over the DevTools protocol, for the HTML report's tests.

Uses Debian's `chromium` binary and the `websocket-client` package; nothing is downloaded. The
page's console errors and uncaught exceptions are collected in `errors`.
"""

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import websocket


def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Page:
    def __init__(self, width=1400, height=1000, timeout=30.0):
        self.timeout = timeout
        self.errors = []
        self._ids = itertools.count(1)
        self._profile = tempfile.mkdtemp(prefix="fqntrace-chromium-")
        self._proc = subprocess.Popen(
            [
                chromium_binary(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                f"--user-data-dir={self._profile}",
                "--remote-debugging-port=0",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            self._connect()
        except BaseException:
            self.close()
            raise

    def _connect(self):
        # Chromium writes the port it picked into DevToolsActivePort in its profile folder.
        port_file = os.path.join(self._profile, "DevToolsActivePort")
        deadline = time.monotonic() + self.timeout
        port = None
        while port is None:
            if self._proc.poll() is not None:
                raise RuntimeError("chromium exited before its DevTools endpoint was up")
            try:
                with open(port_file) as f:
                    first = f.readline().strip()
                port = int(first) if first.isdigit() else None
            except OSError:
                pass
            if port is None:
                if time.monotonic() > deadline:
                    raise RuntimeError("chromium did not open its DevTools endpoint")
                time.sleep(0.05)  # polling a file chromium writes; not hiding a race
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as reply:
            targets = json.load(reply)
        page = next(t for t in targets if t.get("type") == "page")
        self._ws = websocket.create_connection(
            page["webSocketDebuggerUrl"], timeout=self.timeout, suppress_origin=True
        )
        for domain in ("Runtime", "Log", "Page"):
            self.send(f"{domain}.enable")

    def _on_event(self, message):
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(
                " ".join(
                    str(a.get("value", a.get("description", ""))) for a in params.get("args", [])
                )
            )
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append(
                details.get("exception", {}).get("description") or details.get("text", "exception")
            )
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append(params["entry"].get("text", ""))
        return method

    def send(self, method, **params):
        call_id = next(self._ids)
        self._ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._on_event(message)

    def open(self, path):
        """Loads a file and waits for its load event."""
        self.send("Page.navigate", url="file://" + os.path.abspath(path))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self._on_event(json.loads(self._ws.recv())) == "Page.loadEventFired":
                return
        raise TimeoutError(f"{path} did not finish loading")

    def evaluate(self, expression):
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression, timeout=None):
        """Polls a JS expression until it is truthy; returns its value."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"never true: {expression}")
            self.evaluate("new Promise((done) => requestAnimationFrame(() => done(1)))")

    def move(self, x, y):
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def click(self, x, y):
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent",
                type=kind,
                x=x,
                y=y,
                button="left",
                clickCount=0 if kind == "mouseMoved" else 1,
            )

    def screenshot(self, path):
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data["data"]))
        return path

    def close(self):
        try:
            if getattr(self, "_ws", None) is not None:
                self._ws.close()
        finally:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
