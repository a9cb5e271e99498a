"""The ecosystem tier: ordinary programs (tests/python/ecosystem/) run untraced and traced must
behave identically — same stdout (results, tracebacks, profiler rows), same stderr, same exit
code —, every trace they write must pass `validate`, and the trace must name the modules of each
program's final pass exactly as a fresh torch ModTracker names them, with the class each module
has when it runs (docs/compatibility.md). Each program runs traced in full, and those in SAMPLED
once more sampled (FQNTRACE_SAMPLE=0.01, docs/sampling.md: its module scopes are as complete);
every trace must also give a `summary` without a word on stderr."""

import glob
import json
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "ecosystem")
# (program, whether its final pass is compared with a fresh ModTracker's names)
CASES = [
    ("swap_double.py", True),
    ("surgery.py", True),
    ("parametrize_after.py", True),
    ("lazy.py", True),
    ("save_load_copy.py", True),
    ("exception_traceback.py", False),
    ("nesting_depth.py", False),
    ("profiler_rows.py", False),
    ("profiler_stack.py", False),  # with_stack=True: no python_function of fqntrace's
    ("fsdp2_to.py", True),
    ("peft_lora.py", True),
    ("accelerate_train.py", True),
    ("lightning_train.py", True),
    ("export_module.py", True),
    ("torchscript.py", True),
    ("fsdp2_ranks.py", True),  # two ranks (mp.spawn): a trace per process
]


# The sampled run: the programs whose machinery the sampled mode meets differently (backward
# attribution without forward ops, torch.profiler beside it, export and TorchScript, a
# traceback, two ranks); the others add run time and nothing new.
SAMPLED = (
    "surgery.py",
    "exception_traceback.py",
    "profiler_rows.py",
    "peft_lora.py",
    "lightning_train.py",
    "export_module.py",
    "torchscript.py",
    "fsdp2_ranks.py",
)
RUNS = [(program, named, None) for program, named in CASES] + [
    (program, named, "0.01") for program, named in CASES if program in SAMPLED
]


def _env(tmp_path, traced, name, sample=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
    env.update(
        ECOSYSTEM_FQNS=str(tmp_path / f"{name}.{'traced' if traced else 'plain'}.fqns.json"),
        TMPDIR=str(tmp_path),
        PYTHONHASHSEED="0",
        OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
        HF_HUB_OFFLINE="1",
    )
    if traced:
        env["FQNTRACE"] = str(tmp_path / f"{name}.json")
        if sample is not None:
            env["FQNTRACE_SAMPLE"] = sample
    return env


def _start(tmp_path, program, traced, sample=None):
    name = program[:-3]
    return subprocess.Popen(
        [sys.executable, program],
        cwd=PROGRAMS,
        env=_env(tmp_path, traced, name, sample),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc):
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


# Lines that differ between any two runs of the same program, traced or not.
_VOLATILE = [
    re.compile(p)
    for p in (
        r"0x[0-9a-f]+",
        r"\d+\.\d+ ?(s|ms|it/s)\b",
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d",  # Kineto's log lines:
        r"\b\d+:\d+ ",
    )
]  # time, pid:tid


def _stable(text):
    for pattern in _VOLATILE:
        text = pattern.sub("<n>", text)
    return text


def _final_pass_types(trace):
    """{fqn: module_type} of the module spans inside the `ecosystem.final` range (forward)."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    final = [e for e in events if e.get("name") == "ecosystem.final"]
    assert len(final) == 1, "the final pass's range is missing from the trace"
    f = final[0]
    start, end = f["ts"], f["ts"] + f["dur"]
    types = {}
    for e in events:
        if (
            e.get("name", "").startswith("nn.Module: ")
            and e["tid"] == f["tid"]
            and start <= e["ts"]
            and e["ts"] + e["dur"] <= end
            and e["args"].get("phase") == "forward"
        ):
            types.setdefault(e["args"]["fqn"], set()).add(e["args"]["module_type"])
    return types


def _traces(tmp_path, name):
    """Every trace the traced run wrote: <name>.json, and a file per child process."""
    found = [
        p
        for p in sorted(glob.glob(str(tmp_path / f"{name}*.json")))
        if not p.endswith(".fqns.json")
    ]
    assert found, "the traced run wrote no trace"
    return found


def _rank0_with_final_pass(paths):
    for path in paths:
        with open(path) as f:
            trace = json.load(f)
        if trace["distributedInfo"]["rank"] == 0 and any(
            e.get("name") == "ecosystem.final" for e in trace["traceEvents"]
        ):
            return trace
    raise AssertionError(f"no rank-0 trace with the final pass among {paths}")


@pytest.mark.parametrize(
    "program,named,sample", RUNS, ids=[p[:-3] + ("-sampled" if s else "") for p, _, s in RUNS]
)
def test_program_behaves_as_untraced(tmp_path, program, named, sample):
    plain, traced = _start(tmp_path, program, False), _start(tmp_path, program, True, sample)
    rc_plain, out_plain, err_plain = _finish(plain)
    rc_traced, out_traced, err_traced = _finish(traced)
    assert rc_plain == 0, f"the program itself fails untraced:\n{err_plain[-3000:]}"
    assert rc_traced == rc_plain, err_traced[-3000:]
    assert _stable(out_traced) == _stable(out_plain)
    assert _stable(err_traced) == _stable(err_plain)
    name = program[:-3]
    paths = _traces(tmp_path, name)
    for path in paths:  # a trace we write always validates
        check = subprocess.run(
            [sys.executable, "-m", "fqntrace", "validate", path], capture_output=True, text=True
        )
        assert check.returncode == 0, check.stdout + check.stderr
        summary = subprocess.run(
            [sys.executable, "-m", "fqntrace", "summary", path], capture_output=True, text=True
        )
        assert summary.returncode == 0 and not summary.stderr, summary.stdout + summary.stderr
    trace = _rank0_with_final_pass(paths) if named else None
    if trace is None:
        with open(paths[0]) as f:
            trace = json.load(f)
    assert any(e.get("cat") == "cpu_op" for e in trace["traceEvents"])
    if named:
        with open(tmp_path / f"{name}.traced.fqns.json") as f:
            fresh = json.load(f)
        assert fresh, "the fresh ModTracker saw no module"
        assert _final_pass_types(trace) == {fqn: {cls} for fqn, cls in fresh.items()}
