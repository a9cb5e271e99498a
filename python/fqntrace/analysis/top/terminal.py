"""top's terminal loop: `--once` prints one screen; otherwise the screen is redrawn every
--interval, reading meanwhile, with the keys read in cbreak mode."""

import os
import select
import sys
import time

from fqntrace.analysis import step_times
from fqntrace.analysis.top.screen import render
from fqntrace.analysis.top.sources import Sources
from fqntrace.analysis.top.tree import View

INSTALL_HINT = (
    "fqntrace top needs the optional package rich: pip install 'fqntrace[top]' "
    "(or: pip install rich)"
)
READ_SHARE = 0.8  # of each refresh interval spent reading when the job writes faster than that


class _Keys:
    """The terminal's keys without echo or line buffering (cbreak), restored on exit."""

    def __init__(self):
        self.fd = None
        self.saved = None

    def __enter__(self):
        if sys.stdin.isatty():
            import termios
            import tty

            self.fd = sys.stdin.fileno()
            self.saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            import termios

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)

    def wait(self, timeout):
        """The keys pressed within timeout seconds (returns at the first one)."""
        if self.fd is None:
            time.sleep(timeout)
            return []
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        data = os.read(self.fd, 64).decode("utf-8", errors="replace")
        keys = []
        i = 0
        while i < len(data):
            if data[i] == "\x1b" and data[i + 1 : i + 2] == "[" and i + 2 < len(data):
                keys.append(data[i : i + 3])
                i += 3
            else:
                keys.append(data[i])
                i += 1
        return keys


def main(args):
    try:
        import rich  # noqa: F401
    except ImportError:
        sys.stderr.write("fqntrace: " + INSTALL_HINT + "\n")
        return 1
    from rich.console import Console
    from rich.live import Live

    sources = Sources(
        args.traces, args.window, getattr(args, "exclude_steps", step_times.DEFAULT_EXCLUDED)
    )
    view = View(args.depth)
    console = Console()
    if args.once:
        started = time.perf_counter()
        n = 0
        while True:
            got = sources.read(budget_s=1.0)
            n += got
            if not got:
                break
        elapsed = max(time.perf_counter() - started, 1e-9)
        screen, _ = render(sources, view, args.window, n / elapsed)
        console.print(screen)
        return 0
    with (
        _Keys() as keys,
        Live(console=console, auto_refresh=False, screen=False, transient=False) as live,
    ):
        rate = 0.0
        while not view.quit:
            started = time.perf_counter()
            n = sources.read(budget_s=READ_SHARE * args.interval)
            spent = time.perf_counter() - started
            rate = n / spent if n and spent > 0 else rate
            screen, rows = render(sources, view, args.window, rate)
            live.update(screen, refresh=True)
            deadline = started + args.interval
            while not view.quit:
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                pressed = keys.wait(left)
                for k in pressed:
                    view.key(k, rows)
                if pressed:
                    screen, rows = render(sources, view, args.window, rate)
                    live.update(screen, refresh=True)
    for s in sources.sources.values():
        s.follower.close()
    return 0
