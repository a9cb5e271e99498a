"""The benchmark modes and P3's tracker variants, listed once: driver.py runs them,
run_mode.py / callgrind_ops.py set them up and doc_tables.py labels them.

A mode is what one measurement process has switched on around the same workload. The driver sets
FQNTRACE (and FQNTRACE_FLOPS) in the environment of the `traced` modes, so tracing starts the way
it does for a user; run_mode.py sets up everything else.
"""

from typing import NamedTuple


class Mode(NamedTuple):
    name: str
    label: str  # row label in docs/benchmarks.md (Markdown)
    description: str  # what the process runs with
    traced: bool = False  # FQNTRACE=<tmp>.json
    flops: bool = False  # FQNTRACE_FLOPS=1
    rank_of_two: bool = False  # WORLD_SIZE=2 RANK=0: what a rank of a 2-rank job runs with
    sample: float = 1.0  # FQNTRACE_SAMPLE (docs/sampling.md)


MODES = (
    Mode(
        "baseline",
        "baseline (nothing loaded)",
        "nothing (checks that no RecordFunction callback is installed)",
    ),
    Mode(
        "loaded_off",
        "libfqntrace.so loaded, FQNTRACE unset (P6)",
        "libfqntrace.so loaded with FQNTRACE unset: no session, no callback (P6)",
    ),
    Mode(
        "empty",
        "empty observer (the limit)",
        "bench/empty_observer: one global callback that does nothing",
    ),
    Mode(
        "empty_sampled",
        "empty observer shaped as the sampled mode (its limit)",
        "bench/empty_observer/empty_sampled_observer: the two callbacks FQNTRACE_SAMPLE=0.01 "
        "installs (ops sampled at 0.01; nodes and user scopes unsampled), doing nothing",
    ),
    Mode(
        "empty_sampled_ops",
        "empty observer on ops alone, sampled at 0.01 (any op sampler's limit)",
        "the same with FQNTRACE_BENCH_EMPTY_NODES=0: only the ops callback, sampled at 0.01",
    ),
    Mode(
        "fqntrace",
        "**fqntrace** (FQNTRACE set; FLOPs off: default)",
        "FQNTRACE=<tmp>.json (FLOPs off, the default)",
        traced=True,
    ),
    Mode(
        "fqntrace_flops",
        "fqntrace, FQNTRACE_FLOPS=1",
        "the same with FQNTRACE_FLOPS=1 (the callback asks for op inputs to count FLOPs)",
        traced=True,
        flops=True,
    ),
    Mode(
        "fqntrace_sampled",
        "fqntrace, FQNTRACE_SAMPLE=0.01 (sampled)",
        "FQNTRACE=<tmp>.json with FQNTRACE_SAMPLE=0.01: 1 op in 100 recorded (docs/sampling.md)",
        traced=True,
        sample=0.01,
    ),
    Mode(
        "fqntrace_rank",
        "fqntrace as a rank of a 2-rank job sees it (op inputs asked for)",
        "the same with WORLD_SIZE=2 RANK=0 (no process group): the callback asks for every op's "
        "inputs, as in a distributed job, for the collectives' bytes",
        traced=True,
        rank_of_two=True,
    ),
    Mode(
        "fqntrace_nohooks",
        "fqntrace without its module scopes (diagnostic)",
        "fqntrace with torch's own nn.Module.__call__ given back before any module runs "
        "(diagnostic: the ops' share of the cost; the trace then has no module names)",
        traced=True,
    ),
    Mode(
        "profiler",
        "torch.profiler (CPU)",
        "torch.profiler.profile(activities=[CPU]) around the measurement",
    ),
    Mode("profiler_stack", "torch.profiler, with_stack=True", "the same with with_stack=True"),
    Mode(
        "modtracker",
        "ModTracker + TorchDispatchMode (fqn per op)",
        "torch's ModTracker + a TorchDispatchMode recording the current fqns per op",
    ),
)
BY_NAME = {mode.name: mode for mode in MODES}
NAMES = tuple(mode.name for mode in MODES)
LABELS_BY_MODE = {mode.name: mode.label for mode in MODES}

# Which modes each benchmark runs. P1 runs all but fqntrace_rank and the sampled ones (P6 is P1's
# loaded_off beside the baseline).
P1_MODES = tuple(name for name in NAMES if name != "fqntrace_rank" and "sampled" not in name)
CALLGRIND_OPS_MODES = tuple(
    "baseline loaded_off empty fqntrace fqntrace_flops fqntrace_sampled profiler".split()
)
CALLGRIND_MLP_MODES = tuple(
    "baseline empty fqntrace fqntrace_nohooks fqntrace_sampled empty_sampled empty_sampled_ops".split()
)
# P8c: the DDP benchmark's model step in one process, by instructions (what P8's wall time hides).
CALLGRIND_DDP_STEP_MODES = tuple("baseline empty fqntrace fqntrace_rank".split())


class Tracker(NamedTuple):
    name: str
    label: str


# P3: the module trackers compared inside one process (run_mode.py --bench trackers).
TRACKERS = (
    Tracker("none", "no tracker"),
    Tracker("torch_modtracker", "torch `ModTracker` (torch.distributed._tools.mod_tracker)"),
    Tracker("fqntrace_modtracker", "**fqntrace.ModTracker**"),
    Tracker("torch_moduletracker", "torch `ModuleTracker` (torch.utils.module_tracker)"),
    Tracker("fqntrace_moduletracker", "fqntrace.ModuleTracker"),
)
TRACKER_NAMES = tuple(tracker.name for tracker in TRACKERS)
TRACKER_LABELS = {tracker.name: tracker.label for tracker in TRACKERS}


def environment(mode, trace_path):
    """The FQNTRACE variables a measurement process of `mode` gets (none for untraced modes)."""
    if not BY_NAME[mode].traced:
        return {}
    env = {"FQNTRACE": trace_path, "FQNTRACE_FLOPS": "1" if BY_NAME[mode].flops else "0"}
    if BY_NAME[mode].rank_of_two:
        env.update(WORLD_SIZE="2", RANK="0")
    if BY_NAME[mode].sample < 1:
        env["FQNTRACE_SAMPLE"] = repr(BY_NAME[mode].sample)
    return env


# bench/cli_bench.py's bound on a verb's peak RSS (issue 24), also in its table's header.
CLI_RSS_LIMIT_MIB = 256
# The trace sizes (MiB) whose `scripts/bench.sh --cli MiB` run is kept in bench/measured.json (part
# cli-MiB) and shown in docs/benchmarks.md (P9, and the CLI rows of the opening table at the largest).
CLI_DOC_SIZES = (300, 1024)
