"""`python -m fqntrace doctor`: what this installation was built for, what the environment has,
which features work here, and whether tracing can start; `--version` prints the first line.

Exit 0 when tracing can start here, or when there is no torch here (an analysis-only
environment: the CLI is what it is for); 1 when torch is here but the tracer cannot start,
with the command that fixes it."""

import importlib
import os
import sys

from fqntrace import __version__, _build, _fsdp

# The private torch APIs each optional feature relies on, looked up by name: a missing one turns
# that feature off (its set-up says so in one line at run time) and nothing else.
FEATURES = (
    (
        "torch.compile: compiles as untraced, compiled code keeps module names",
        (
            "torch._dynamo.decorators:substitute_in_graph",
            "torch._dynamo.decorators:is_function",
            "torch._inductor.custom_graph_pass:CustomGraphPass",
            "torch._inductor.utils:aggregate_origins",
            "torch._inductor.virtualized:V",
            "torch._inductor.runtime.cache_dir_utils:cache_dir",
            "torch._inductor.compile_fx:_compile_fx_inner",
            "torch._inductor.output_code:CompiledFxGraph.__call__",
        ),
    ),
    (
        "FSDP2: all-gathers and reduce-scatters named by the module they serve",
        tuple(f"{_fsdp.TARGET}:FSDPParamGroup.{method}" for method in _fsdp.SERVED_METHODS),
    ),
    (
        "torch.profiler traces annotated with fqn and phase",
        (
            "torch.autograd.profiler:_enable_profiler",
            "torch.autograd.profiler:_disable_profiler",
            "torch.autograd.profiler:profile.export_chrome_trace",
        ),
    ),
    (
        "training steps from optimizer steps",
        ("torch.optim.optimizer:register_optimizer_step_post_hook",),
    ),
    (
        "module names (nn.Module registration hooks)",
        (
            "torch.nn.modules.module:register_module_module_registration_hook",
            "torch.nn.modules.module:register_module_parameter_registration_hook",
        ),
    ),
    (
        "fqntrace.ModTracker",
        (
            "torch._C:_current_graph_task_id",
            "torch.autograd.graph:register_multi_grad_hook",
            "torch.utils._pytree:tree_flatten",
        ),
    ),
)


def missing_apis(names):
    """The `module:attr.path` names of `names` that this torch does not have."""
    missing = []
    for name in names:
        module_name, _, path = name.partition(":")
        try:
            value = importlib.import_module(module_name)
            for part in path.split("."):
                value = getattr(value, part)
        except Exception:
            missing.append(name)
    return missing


def _torch():
    try:
        import torch
    except Exception as error:  # not installed, or broken
        return None, error
    return torch, None


def _engines_line():
    try:
        from fqntrace.analysis import summarize

        native = summarize._native is not None
    except Exception:
        native = False
    try:
        import msgspec  # noqa: F401

        decoder = "msgspec"
    except ImportError:
        decoder = "the standard library's json (install msgspec for about twice the speed)"
    if native:
        return "CLI: native engines (simdjson)"
    return f"CLI: Python path, decoding with {decoder}"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    record = _build.info()
    package = os.path.dirname(os.path.abspath(__file__))
    print(f"fqntrace {__version__} at {package}")
    if argv[:1] == ["--version"]:
        return 0
    source = _build.installed_from()
    if source:
        print(f"installed from: {source}")
    if record is None:
        print("built: no build record (a copy of the sources, not a pip install)")
    elif record.TRACER:
        cuda = f", CUDA {record.TORCH_CUDA}" if record.TORCH_CUDA else ", CPU"
        git = record.TORCH_GIT_VERSION[:12] or "?"
        engines = "yes" if record.NATIVE_ENGINES else "no"
        print(
            f"built: tracer for {_build.built_for(record)}{cuda} (git {git}) with "
            f"{record.COMPILER}; native CLI engines: {engines}"
        )
    else:
        print(
            "built: analysis half only (no tracer: the build found no torch, C++ compiler or "
            "Python headers); "
            f"native CLI engines: {'yes' if record.NATIVE_ENGINES else 'no'}"
        )
    print(_engines_line())

    torch, error = _torch()
    if torch is None:
        print(f"torch: not importable here ({error}); the CLI works, tracing needs torch")
        return 0
    cuda = f"CUDA {torch.version.cuda}" if getattr(torch.version, "cuda", None) else "CPU"
    print(f"torch: {torch.__version__} ({cuda}) at {os.path.dirname(torch.__file__)}")

    from fqntrace import _native

    try:
        _native.load()
    except _native.NotLoadable as failure:
        print(f"tracing: cannot start here: {failure.reason}")
        return 1
    print("tracing: can start here (FQNTRACE=trace.json python your_script.py)")
    for feature, names in FEATURES:
        missing = missing_apis(names)
        state = "yes" if not missing else "off (this torch has no " + ", ".join(missing) + ")"
        print(f"  {feature}: {state}")
    return 0
