"""Names read from a trace are data: a module whose name holds an escape sequence, a newline or
rich's markup is shown with those characters escaped by every verb that prints a table to a
terminal (summary, diff, top --once), so the name cannot recolour the screen, break a row or
restyle what follows it."""

import subprocess
import sys

import fqntrace
import pytest
import torch
from conftest import load_trace, slices
from torch import nn

# torch.nn.Module.add_module refuses only "." and "" in a name.
ESCAPE = "red\x1b[31m"
NEWLINE = "line\nbreak"
MARKUP = "[bold]m[/]"


class Odd(nn.Module):
    def __init__(self):
        super().__init__()
        for name in (ESCAPE, NEWLINE, MARKUP):
            self.add_module(name, nn.Linear(8, 8))

    def forward(self, x):
        for child in self.children():
            x = child(x)
        return x


@pytest.fixture(scope="module")
def odd_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("names") / "odd.json"
    model, x = Odd(), torch.randn(4, 8)
    with fqntrace.profile(str(path)):
        for _ in range(7):
            model(x).sum().backward()
            fqntrace.step()
    return str(path)


def cli(*args):
    out = subprocess.run([sys.executable, "-m", "fqntrace", *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def assert_escaped(text):
    assert "\x1b" not in text, text
    assert "red\\x1b[31m" in text, text
    assert "line\\nbreak" in text, text
    # The newline did not end a row: no line starts with what followed it in the name.
    assert not any(line.lstrip().startswith("break") for line in text.splitlines()), text


def test_the_trace_keeps_the_names_and_validates(odd_trace):
    fqns = {e["args"].get("fqn") for e in slices(load_trace(odd_trace))}
    assert {f"Odd.{ESCAPE}", f"Odd.{NEWLINE}", f"Odd.{MARKUP}"} <= fqns
    cli("validate", odd_trace)


def test_summary_and_diff_escape_the_names(odd_trace):
    assert_escaped(cli("summary", odd_trace))
    assert_escaped(cli("diff", odd_trace, odd_trace, "--all"))


def test_top_shows_markup_as_text_and_escapes_the_names(odd_trace):
    out = cli("top", "--once", odd_trace)
    assert_escaped(out)
    assert MARKUP in out  # rich did not read it as markup (which would show "m" in bold)
