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
    description: str  # what the process runs with (run_mode.py --help)
    env: str | None = None  # traced modes: the variables set beside FQNTRACE=<tmp>.json

    @property
    def traced(self):
        return self.env is not None


MODES = (
    Mode("baseline", "baseline (nothing loaded)", "nothing; checks that no callback is installed"),
    Mode("loaded_off", "libfqntrace.so loaded, FQNTRACE unset (P6)", "no session, no callback"),
    Mode("empty", "empty observer (the limit)", "bench/empty_observer: one no-op global callback"),
    Mode(
        "empty_sampled",
        "empty observer shaped as the sampled mode (its limit)",
        "no-op callbacks installed as FQNTRACE_SAMPLE=0.01 installs them",
    ),
    Mode(
        "empty_sampled_ops",
        "empty observer on ops alone, sampled at 0.01 (any op sampler's limit)",
        "the same with FQNTRACE_BENCH_EMPTY_NODES=0: the ops callback alone",
    ),
    Mode("fqntrace", "**fqntrace** (FQNTRACE set; FLOPs off: default)", "", "FQNTRACE_FLOPS=0"),
    Mode("fqntrace_flops", "fqntrace, FQNTRACE_FLOPS=1", "", "FQNTRACE_FLOPS=1"),
    Mode(
        "fqntrace_sampled",
        "fqntrace, FQNTRACE_SAMPLE=0.01 (sampled)",
        "1 op in 100 recorded (docs/sampling.md)",
        "FQNTRACE_FLOPS=0 FQNTRACE_SAMPLE=0.01",
    ),
    Mode(
        "fqntrace_rank",
        "fqntrace as a rank of a 2-rank job sees it (op inputs asked for)",
        "no process group; every op's inputs asked for",
        "FQNTRACE_FLOPS=0 WORLD_SIZE=2 RANK=0",
    ),
    Mode(
        "fqntrace_nohooks",
        "fqntrace without its module scopes (diagnostic)",
        "module hooks removed before any module runs: the ops' share",
        "FQNTRACE_FLOPS=0",
    ),
    Mode("profiler", "torch.profiler (CPU)", "torch.profiler.profile(activities=[CPU]) around it"),
    Mode("profiler_stack", "torch.profiler, with_stack=True", "the same with with_stack=True"),
    Mode("modtracker", "ModTracker + TorchDispatchMode (fqn per op)", "fqns per op in Python"),
)
BY_NAME = {mode.name: mode for mode in MODES}
NAMES = tuple(BY_NAME)
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

# P3: the module trackers compared inside one process (run_mode.py --bench trackers), labelled.
TRACKER_LABELS = {
    "none": "no tracker",
    "torch_modtracker": "torch `ModTracker` (torch.distributed._tools.mod_tracker)",
    "fqntrace_modtracker": "**fqntrace.ModTracker**",
    "torch_moduletracker": "torch `ModuleTracker` (torch.utils.module_tracker)",
    "fqntrace_moduletracker": "fqntrace.ModuleTracker",
}
TRACKER_NAMES = tuple(TRACKER_LABELS)


def environment(mode, trace_path):
    """The FQNTRACE variables a measurement process of `mode` gets (none for untraced modes)."""
    if not BY_NAME[mode].traced:
        return {}
    return {"FQNTRACE": trace_path, **dict(kv.split("=") for kv in BY_NAME[mode].env.split())}


def help_line(mode):
    """The mode as run_mode.py --help lists it."""
    settings = f"FQNTRACE=<tmp>.json {mode.env}" if mode.traced else ""
    return f"  {mode.name:<17} " + ": ".join(filter(None, (settings, mode.description)))


# bench/cli_bench.py's bound on a verb's peak RSS (issue 24), also in its table's header.
CLI_RSS_LIMIT_MIB = 256
# The trace sizes (MiB) whose `scripts/bench.sh --cli MiB` run is kept in bench/measured.json (part
# cli-MiB) and shown in docs/benchmarks.md (P9, and the CLI rows of the opening table at the largest).
CLI_DOC_SIZES = (300, 1024)
