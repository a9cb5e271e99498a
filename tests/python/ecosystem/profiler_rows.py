"""The user's own torch.profiler: the rows of key_averages() and the exported trace's ranges."""

import json
import os
import tempfile

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
x = torch.randn(4, 8)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    model(x).sum().backward()
rows = sorted((e.key, e.count) for e in prof.key_averages())
for key, count in rows:
    print(f"{key}: {count}")
path = os.path.join(tempfile.mkdtemp(), "prof.json")
prof.export_chrome_trace(path)
with open(path) as f:
    names = sorted(
        {
            e.get("name")
            for e in json.load(f)["traceEvents"]
            if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
        }
    )
print("exported ranges:", names)
