"""The whole plugin — observer, session, binding, module scopes — under ASan+UBSan, driven from
Python (scripts/sanitizers.sh runs it with the sanitizer runtimes preloaded and the instrumented
libfqntrace.so and _C in the package). Any sanitizer report ends the process with an error.

Exercised: tracing from FQNTRACE at import (Chrome + JSON Lines + summary), module scopes from
fqntrace's nn.Module.__call__ (a forward that raises included), backward on autograd's and user
threads, FLOPs and shapes, steps, then fqntrace.profile() sessions started and stopped again
(gzip output), and the files read back.
"""

import gzip
import json
import os
import sys
import threading

import fqntrace
import torch
from fqntrace import _native, _summary_file
from torch import nn


class Raises(nn.Module):
    def forward(self, x):
        raise ValueError("from forward")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        self.fails = Raises()

    def forward(self, x):
        try:
            self.fails(x)
        except ValueError:
            pass
        return self.body(x)


def train(model, steps):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        model(torch.randn(8, 16)).sum().backward()
        opt.step()
        opt.zero_grad()


def main(out_dir):
    torch.manual_seed(0)
    model = Net()
    assert fqntrace.tracing(), "FQNTRACE did not start tracing"
    workers = [threading.Thread(target=train, args=(Net(), 3)) for _ in range(3)]
    for worker in workers:
        worker.start()
    train(model, 3)
    for worker in workers:
        worker.join()
    binding = _native.load()
    assert binding.stop(), "the FQNTRACE session could not write its files"
    _summary_file.write_finished(binding)  # FQNTRACE_FORMATS=summary, as the exit hook does
    with open(os.environ["FQNTRACE"]) as f:
        trace = json.load(f)
    assert trace["fqntrace"]["complete"] and trace["fqntrace"]["dropped_events"] == 0
    threads = {e["tid"] for e in trace["traceEvents"] if e.get("ph") == "X"}
    assert len(threads) >= 4, threads  # the main thread and the three workers
    with open(os.environ["FQNTRACE"][: -len(".json")] + ".summary.json") as f:
        assert "Net.body.2" in json.load(f)["modules"]

    for i in range(3):  # sessions started and stopped in one process
        path = os.path.join(out_dir, f"profile{i}.json.gz")
        with fqntrace.profile(path):
            train(model, 2)
        with gzip.open(path, "rt") as f:
            trace = json.load(f)
        fqns = {e["args"].get("fqn") for e in trace["traceEvents"] if e.get("ph") == "X"}
        assert "Net.body.0" in fqns and "Net.fails" in fqns, sorted(map(str, fqns))
    print("python smoke: ok")


if __name__ == "__main__":
    main(sys.argv[1])
