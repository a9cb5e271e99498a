"""fqntrace's per-module memory against torch's MemTracker (TorchDispatchMode + ModTracker) on the
same model, input and first iteration. Run as a script: prints JSON rows
{model, fqn, mt_fw_peak, fq_fw_peak, mt_act, fq_act, mt_output} for every module MemTracker
saw (mt_output: MemTracker's output_mem of the module).

What is compared (docs/memory.md, "Against MemTracker"):
  forward peak: MemTracker's Peak-Forward total minus its Pre-Forward total (the most memory
    the module's forward added) against fqntrace's peak_bytes in forward;
  activations: MemTracker's Activation bytes at Post-Forward minus Pre-Forward (what the
    forward left alive) against fqntrace's activation_bytes (allocated in forward, freed in
    backward). They differ by design for a module whose output is freed in forward after it
    returns (MemTracker counts the output, fqntrace does not: it was not kept for backward).
  A kernel's own scratch memory (oneDNN's convolution allocates an output-sized buffer and frees
  it inside the op) is seen by the allocator, not by a dispatch mode: fqntrace's peak of such a
  module is higher.
"""

import copy
import json
import os
import sys
import tempfile

import torch


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2,
        n_head=2,
        n_embd=64,
        vocab_size=128,
        n_positions=64,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        attn_implementation="eager",
    )
    model = GPT2LMHeadModel(config)
    x = torch.randint(0, 128, (4, 32))
    return model, lambda m: m(x).logits.sum()


def convnet():
    torch.manual_seed(0)

    class Stage(torch.nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.conv = torch.nn.Conv2d(cin, cout, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(cout)
            self.act = torch.nn.ReLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    class ConvNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stage1 = Stage(3, 16)
            self.stage2 = Stage(16, 32)
            self.pool = torch.nn.AdaptiveAvgPool2d(1)
            self.head = torch.nn.Linear(32, 10)

        def forward(self, x):
            x = self.stage2(self.stage1(x))
            return self.head(torch.flatten(self.pool(x), 1))

    x = torch.randn(8, 3, 32, 32)
    return ConvNet(), lambda m: m(x).sum()


def memtracker_numbers(model, loss_of):
    from torch.distributed._tools.mem_tracker import MemTracker, _ModState

    mt = MemTracker()
    mt.track_external(model)
    with mt:
        loss_of(model).backward()
    dev = torch.device("cpu")
    out = {}
    for stats in mt.memory_tracking.values():
        snaps = stats.snapshots
        pre, post, peak = (
            snaps[s][0][dev] for s in (_ModState.PRE_FW, _ModState.POST_FW, _ModState.PEAK_FW)
        )
        out[stats.mod_fqn] = {
            "fw_peak": peak["Total"] - pre["Total"],
            "act": post.get("Activation", 0) - pre.get("Activation", 0),
            "output": stats.output_mem,
        }
    return out


def fqntrace_numbers(model, loss_of):
    import fqntrace
    from fqntrace.analysis import summarize, whole_file

    path = os.path.join(tempfile.mkdtemp(), "mem.json")
    with fqntrace.profile(path, memory=True):
        loss_of(model).backward()
    s = summarize.summarize(whole_file.load(path))
    return {
        fqn: {"fw_peak": m["forward"]["peak_bytes"], "act": m["forward"]["activation_bytes"]}
        for fqn, m in s["modules"].items()
    }


def main():
    torch.set_num_threads(1)
    rows = []
    for name, make in (("gpt2", gpt2), ("convnet", convnet)):
        model, loss_of = make()
        loss_of(copy.deepcopy(model)).backward()  # warm-up: lazy initialisation outside both
        fq = fqntrace_numbers(copy.deepcopy(model), loss_of)
        mt = memtracker_numbers(copy.deepcopy(model), loss_of)
        for fqn, m in mt.items():
            f = fq.get(fqn, {"fw_peak": 0, "act": 0})
            rows.append(
                {
                    "model": name,
                    "fqn": fqn,
                    "mt_fw_peak": m["fw_peak"],
                    "fq_fw_peak": f["fw_peak"],
                    "mt_act": m["act"],
                    "fq_act": f["act"],
                    "mt_output": m["output"],
                }
            )
    json.dump(rows, sys.stdout)


if __name__ == "__main__":
    main()
