"""`annotate`: a torch.profiler (Kineto) trace gets fqntrace's `args.fqn` and `args.phase`.

The join is by identity, never by time:
* a cpu_op (and a user_annotation: `record_function` ranges, fqntrace's own `nn.Module: …`
  scopes, `ProfilerStep#N`) carries `"Record function id"`, the handle of its RecordFunction.
  While torch.profiler records, fqntrace's callback asks RecordFunction for ids too, so its own
  event for the same range carries the same handle (fqntrace's trace writes it as the same key).
* a device event (kernel, memcpy, memset) carries the `"External id"` of the op that launched it
  (Kineto's correlation of the CUDA launch with the innermost open op); where that is missing,
  its `"correlation"` leads to the runtime call (`cudaLaunchKernel`, `cudaMemcpyAsync`, …) with
  the same correlation, whose `"External id"` names the op. It gets that op's fqn and phase; the
  runtime call gets them too.

Used in the traced process when torch.profiler exports (fqntrace._kineto_hook, attribution from
the drain) and by `python -m fqntrace annotate KINETO FQNTRACE -o OUT` for traces made apart
(attribution read from fqntrace's trace of the same run). Standard library only.
"""

import json

from fqntrace.analysis import errors, trace_write, tracestream, whole_file
from fqntrace.analysis.errors import TraceError
from fqntrace.analysis.trace_events import PHASES

RF_ID = "Record function id"
EXTERNAL_ID = "External id"
# Kineto's categories (libkineto ActivityType names as written in traces).
HOST_CATS = ("cpu_op", "user_annotation")
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "runtime", "driver")


class Counts:
    """How much of a Kineto trace got an fqn."""

    def __init__(self):
        self.cpu_ops = 0
        self.cpu_ops_annotated = 0
        self.annotations = 0
        self.annotations_annotated = 0
        self.device = 0
        self.device_annotated = 0

    def line(self):
        def share(done, total):
            return f"{done}/{total} ({100.0 * done / total:.1f} %)" if total else "0/0"

        text = (
            f"cpu_ops {share(self.cpu_ops_annotated, self.cpu_ops)}, user annotations "
            f"{share(self.annotations_annotated, self.annotations)}"
        )
        if self.device:
            text += f", device events {share(self.device_annotated, self.device)}"
        return text


def _int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def annotate_events(events, attribution):
    """Adds fqn/phase (and module_type on fqntrace's module scopes) in place. `attribution`:
    {Record function id: (fqn, phase, module_type or None)}. Returns Counts."""
    counts = Counts()
    by_external = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X" or e.get("cat") not in HOST_CATS:
            continue
        args = e.get("args")
        if not isinstance(args, dict):
            continue
        is_op = e["cat"] == "cpu_op"
        if is_op:
            counts.cpu_ops += 1
        else:
            counts.annotations += 1
        rf = _int(args.get(RF_ID))
        found = attribution.get(rf) if rf else None
        if found is None:
            continue
        fqn, phase, module_type = found
        args["fqn"] = fqn
        args["phase"] = phase
        if module_type and not is_op:
            args["module_type"] = module_type
        if is_op:
            counts.cpu_ops_annotated += 1
        else:
            counts.annotations_annotated += 1
        ext = _int(args.get(EXTERNAL_ID))
        if ext is not None and (is_op or ext not in by_external):
            by_external[ext] = (fqn, phase)
    if not by_external:
        return counts
    by_correlation = {}
    for e in events:
        if not isinstance(e, dict) or e.get("cat") not in RUNTIME_CATS:
            continue
        args = e.get("args")
        if not isinstance(args, dict):
            continue
        owner = by_external.get(_int(args.get(EXTERNAL_ID)))
        if owner is None:
            continue
        args["fqn"], args["phase"] = owner
        corr = _int(args.get("correlation"))
        if corr is not None:
            by_correlation[corr] = owner
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X" or e.get("cat") not in DEVICE_CATS:
            continue
        args = e.get("args")
        if not isinstance(args, dict):
            continue
        counts.device += 1
        owner = by_external.get(_int(args.get(EXTERNAL_ID)))
        if owner is None:
            owner = by_correlation.get(_int(args.get("correlation")))
        if owner is not None:
            args["fqn"], args["phase"] = owner
            counts.device_annotated += 1
    return counts


def attribution_from_trace(path):
    """{Record function id: (fqn, phase, module_type or None)} from fqntrace's trace (either
    format, .gz, cut off too), read as a stream."""
    found = {}
    stream, events = tracestream.events(path)
    with stream:
        for e in events:
            if not isinstance(e, dict) or e.get("ph") != "X":
                continue
            args = e.get("args")
            if not isinstance(args, dict):
                continue
            rf = _int(args.get(RF_ID))
            if rf and isinstance(args.get("fqn"), str) and args.get("phase") in PHASES:
                module_type = args.get("module_type")
                found[rf] = (
                    args["fqn"],
                    args["phase"],
                    module_type if isinstance(module_type, str) else None,
                )
    return found


def load_kineto(path):
    """The Kineto trace as a JSON object (plain or gzip)."""
    text = whole_file.read_text(path)
    try:
        doc = json.loads(text)
    except ValueError as error:
        raise TraceError(
            f"{path}: not valid JSON ({errors.describe_json_error(error)}); give "
            "the file torch.profiler's export_chrome_trace wrote"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(
            f"{path}: not a Chrome trace (no traceEvents list); give the file "
            "torch.profiler's export_chrome_trace wrote"
        )
    return doc


def write_kineto(path, doc):
    """Writes the trace (gzip when the path ends in .gz), replacing the file at once."""
    trace_write.write_atomic(path, json.dumps(doc, ensure_ascii=False, separators=(",", ":")))


def annotate_file(kineto_path, attribution, output=None):
    """Annotates a Kineto trace file (in place unless `output`); returns Counts."""
    doc = load_kineto(kineto_path)
    counts = annotate_events(doc["traceEvents"], attribution)
    write_kineto(output or kineto_path, doc)
    return counts


def annotate_files(kineto_path, fqntrace_path, output):
    """The `annotate` verb: Counts, and the number of ids fqntrace's trace had."""
    doc = load_kineto(kineto_path)  # the profiler's file first: its problems are the likelier
    attribution = attribution_from_trace(fqntrace_path)
    if not attribution:
        raise TraceError(
            f"{fqntrace_path}: no event carries a \"Record function id\"; the trace "
            "must come from the same run, traced with FQNTRACE while torch.profiler "
            "recorded (fqntrace asks for the ids only then)"
        )
    counts = annotate_events(doc["traceEvents"], attribution)
    write_kineto(output, doc)
    return counts, len(attribution)
