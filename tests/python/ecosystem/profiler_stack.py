"""The user's torch.profiler with with_stack=True around a model's first calls (fqntrace names
the model there), a module registered and a parameter created inside, and an optimizer step: the
Python functions its exported trace records are the program's and torch's, never fqntrace's."""

import json
import os
import tempfile

import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(4, 8)
with torch.profiler.profile(
    activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True
) as prof:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(x).sum().backward()
    model.add_module("head", nn.Linear(8, 2))
    model(x).sum().backward()
    opt.step()
path = os.path.join(tempfile.mkdtemp(), "prof.json")
prof.export_chrome_trace(path)
with open(path) as f:
    functions = [
        e["name"]
        for e in json.load(f)["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") == "python_function"
    ]
print("python functions recorded:", len(functions) > 0)
print("fqntrace's among them:", sorted({n for n in functions if "fqntrace" in n}))
