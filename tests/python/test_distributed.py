"""fqntrace under torchrun: two CPU ranks on gloo train a tiny transformer
(tests/python/dist_scripts/train.py, which never mentions fqntrace) with FQNTRACE set.

Checked: per-rank files and their header, the attribution of DDP's and FSDP2's collectives (the
issuing c10d op and gloo's work range), the summary's communication columns, the merge of the
ranks' files, HolisticTraceAnalysis reading them as one job, and what a SIGKILLed rank leaves.
Each torchrun run is bounded by TIMEOUT; the runs are shared by the tests (module fixtures).
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "dist_scripts", "train.py")
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
TIMEOUT = 120
WORLD = 2
TORCH_EXIT_ABORT = "terminate called without an active exception"

pytestmark = pytest.mark.skipif(not os.path.exists(TORCHRUN), reason="torchrun not in this venv")


# ---------------------------------------------------------------------------------------------
# running and reading


def torchrun(workdir, fqntrace, *args, env_extra=None, launcher_args=(), expect_ok=True):
    """Runs train.py on WORLD CPU ranks; returns the CompletedProcess (stdout + stderr merged)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FQNTRACE", "TORCHELASTIC", "MASTER_"))
        and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")
    }
    env.update({"FQNTRACE": fqntrace, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    env.update(env_extra or {})
    cmd = [TORCHRUN, "--standalone", f"--nproc_per_node={WORLD}", *launcher_args, SCRIPT, *args]
    proc = subprocess.run(
        cmd,
        env=env,
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=TIMEOUT,
    )
    if expect_ok and proc.returncode != 0:
        # torch's gloo abort at interpreter exit (docs/reliability.md) may end a rank after its
        # work, traced or not; train.py does not wait it out. Then every rank finished its
        # steps, and every trace is whole or `repair` makes it whole.
        assert TORCH_EXIT_ABORT in proc.stdout, proc.stdout[-4000:]
        for rank in range(WORLD):
            assert f"rank {rank} done" in proc.stdout, proc.stdout[-4000:]
        for path in glob.glob(os.path.join(workdir, "run*.json")):
            if path.endswith(".summary.json") or cli("validate", path, check=False).returncode == 0:
                continue
            cli("repair", path)
            cli("validate", path)
    return proc


def load(path):
    with open(path) as f:
        return json.load(f)


def xs(trace):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"]


def main_tid(trace):
    return xs(trace)[0]["pid"]  # the main thread's id is the process id


def issuers(trace):
    """The issuing c10d ops, in start order."""
    return sorted((e for e in xs(trace) if e["name"].startswith("c10d::")), key=lambda e: e["ts"])


def works(trace):
    """gloo's work ranges, in start order."""
    return sorted((e for e in xs(trace) if e["args"].get("async_work")), key=lambda e: e["ts"])


def inside(inner, outer):
    return (
        inner["tid"] == outer["tid"]
        and outer["ts"] <= inner["ts"] + 1e-3
        and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1e-3
    )


def steps(trace):
    """{i: the "step i" range}."""
    return {int(e["name"].split()[1]): e for e in xs(trace) if re.fullmatch(r"step \d+", e["name"])}


def step_of(event, trace):
    for i, s in steps(trace).items():
        if inside(event, s):
            return i
    return None


def pairs(trace, kinds=None):
    """(issuer, work) pairs, per collective kind: each work (in start order) with the earliest
    unpaired issuer that has its attribution, else with the earliest unpaired issuer (then the
    caller's attribution check fails). gloo may run two buckets' works in either order, so the
    n-th work need not belong to the n-th issuer."""
    out = []
    kinds = kinds or {e["args"]["collective"] for e in issuers(trace) + works(trace)}
    for kind in sorted(kinds):
        issued = [e for e in issuers(trace) if e["args"]["collective"] == kind]
        done = [e for e in works(trace) if e["args"]["collective"] == kind]
        assert len(issued) == len(done), (kind, len(issued), len(done))
        for work in done:
            match = next(
                (
                    i
                    for i in issued
                    if attribution(i) == attribution(work) and i["ts"] <= work["ts"]
                ),
                issued[0],
            )
            issued.remove(match)
            out.append((match, work))
    return out


ATTRIBUTION = ("fqn", "phase", "collective", "bytes", "group_size")


def attribution(event):
    return tuple(event["args"].get(k) for k in ATTRIBUTION)


# ---------------------------------------------------------------------------------------------
# runs


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    d = tmp_path_factory.mktemp("ddp")
    proc = torchrun(
        d,
        str(d / "run.{rank}.json"),
        "--mode",
        "ddp",
        "--steps",
        "3",
        "--log-loss",
        "--dump-buckets",
        str(d / "buckets.json"),
        env_extra={"FQNTRACE_FORMATS": "summary"},
    )
    return {
        "dir": d,
        "out": proc.stdout,
        "ddp": load(d / "buckets.json"),
        "traces": [load(d / f"run.{r}.json") for r in range(WORLD)],
        "summaries": [load(d / f"run.{r}.summary.json") for r in range(WORLD)],
    }


@pytest.fixture(scope="module")
def fsdp(tmp_path_factory):
    d = tmp_path_factory.mktemp("fsdp")
    proc = torchrun(d, str(d / "run.{rank}.json"), "--mode", "fsdp", "--steps", "2", "--log-loss")
    return {
        "dir": d,
        "out": proc.stdout,
        "traces": [load(d / f"run.{r}.json") for r in range(WORLD)],
    }


@pytest.fixture(scope="module")
def fsdp_prefetch(tmp_path_factory):
    d = tmp_path_factory.mktemp("fsdp_prefetch")
    torchrun(d, str(d / "run.{rank}.json"), "--mode", "fsdp", "--steps", "2", "--prefetch")
    return {"traces": [load(d / f"run.{r}.json") for r in range(WORLD)]}


# ---------------------------------------------------------------------------------------------
# per-rank files


def test_one_file_per_rank_with_distributed_info(ddp):
    names = sorted(os.listdir(ddp["dir"]))
    # torchrun's own process is not traced: it would have written run.0.json too.
    assert names == [
        "buckets.json",
        "run.0.json",
        "run.0.summary.json",
        "run.1.json",
        "run.1.summary.json",
    ]
    bases = []
    for rank, trace in enumerate(ddp["traces"]):
        assert trace["distributedInfo"] == {"backend": "gloo", "rank": rank, "world_size": WORLD}
        assert trace["fqntrace"]["complete"] is True and trace["fqntrace"]["dropped_events"] == 0
        assert isinstance(trace["baseTimeNanoseconds"], int)
        bases.append(trace["baseTimeNanoseconds"])
        labels = [e for e in trace["traceEvents"] if e.get("name") == "process_labels"]
        assert labels[0]["args"]["labels"] == f"rank {rank}"
        assert ddp["summaries"][rank]["rank"] == rank
    assert abs(bases[0] - bases[1]) <= 60 * 10**9  # the same job, started within a minute


def test_without_rank_placeholder_each_rank_gets_its_file_and_rank0_says_so(tmp_path):
    logs = tmp_path / "logs"
    torchrun(
        tmp_path,
        str(tmp_path / "run.json"),
        "--mode",
        "ddp",
        "--steps",
        "1",
        launcher_args=("--redirects", "3", "--log-dir", str(logs)),
    )
    assert sorted(p for p in os.listdir(tmp_path) if p != "logs") == [
        "run.rank0.json",
        "run.rank1.json",
    ]
    for rank in range(WORLD):
        trace = load(tmp_path / f"run.rank{rank}.json")
        assert trace["distributedInfo"]["rank"] == rank
        assert trace["fqntrace"]["complete"] is True
    # torchrun --redirects keeps each local rank's stderr in <log-dir>/<run>/attempt_0/<rank>/.
    stderr = {}
    for rank in range(WORLD):
        [path] = glob.glob(str(logs / "*" / "attempt_0" / str(rank) / "stderr.log"))
        with open(path) as f:
            stderr[rank] = [line for line in f if line.startswith("fqntrace:")]
    assert len(stderr[0]) == 1, stderr
    assert "no {rank}" in stderr[0][0] and "WORLD_SIZE=2" in stderr[0][0]
    assert "run.rank0.json" in stderr[0][0]
    assert stderr[1] == []


# ---------------------------------------------------------------------------------------------
# DDP

KINDS = {
    "allreduce",
    "allgather",
    "reduce_scatter",
    "broadcast",
    "alltoall",
    "barrier",
    "gather",
    "scatter",
    "reduce",
    "send",
    "recv",
}


def test_ddp_every_collective_is_described(ddp):
    for trace in ddp["traces"]:
        assert issuers(trace) and works(trace)
        main = main_tid(trace)
        for e in issuers(trace) + works(trace):
            a = e["args"]
            assert a["collective"] in KINDS, e
            assert a["phase"] in ("forward", "backward"), e
            assert isinstance(a["fqn"], str) and a["fqn"], e
            assert isinstance(a["bytes"], int) and a["bytes"] >= 0, e
            assert a["group_size"] == WORLD, e
        for e in issuers(trace):
            assert e["cat"] == "cpu_op" and e["tid"] == main, e
            assert e["args"]["bytes"] > 0, e
        for e in works(trace):
            assert e["cat"] == "user_annotation" and e["name"].startswith("gloo:"), e
            assert e["tid"] != main, e


# c10d::allgather_ takes Tensor[][] first (its output lists): those bytes count too.
def test_list_allgather_reports_its_bytes(ddp):
    # DDP's constructor all-gathers parameter metadata with the list form (c10d::allgather_).
    gathers = [e for e in issuers(ddp["traces"][0]) if e["name"] == "c10d::allgather_"]
    assert gathers
    assert all(e["args"]["bytes"] > 0 for e in gathers), gathers


def test_ddp_gradient_allreduces_name_the_module_that_completed_the_bucket(ddp):
    buckets = ddp["ddp"]["buckets"]
    assert len(buckets) >= 4  # bucket_cap_mb=0.05: several buckets
    prefix = "DistributedDataParallel.module."
    for trace in ddp["traces"]:
        grads = [
            e
            for e in issuers(trace)
            if e["name"] == "c10d::allreduce_" and e["args"]["phase"] == "backward"
        ]
        by_step = {}
        for e in grads:
            by_step.setdefault(step_of(e, trace), []).append(e)
        assert sorted(by_step) == [0, 1, 2]
        # Iteration 0 runs with one bucket of everything (DDP's first bucket is 1 MiB), then
        # DDP rebuilds its buckets in gradient-ready order: the buckets dumped by train.py.
        [first] = by_step[0]
        assert first["args"]["bytes"] == ddp["ddp"]["param_bytes"]
        assert first["args"]["fqn"] == prefix + "embed"  # the last gradient to be ready
        for step in (1, 2):
            assert len(by_step[step]) == len(buckets)
            for e, bucket in zip(by_step[step], buckets):
                owners = {prefix + o for o in bucket["owners"]}
                assert e["args"]["bytes"] == bucket["bytes"], (e, bucket)
                assert e["args"]["fqn"] in owners, (e["args"]["fqn"], owners)
                # Issued from the post-hook of the AccumulateGrad that completed the bucket: the
                # bucket's last parameter in ready order.
                assert e["args"]["fqn"] == prefix + bucket["owners"][-1]
        # Outside backward: the loss all-reduce of --log-loss is Global forward, 4 bytes.
        logged = [
            e
            for e in issuers(trace)
            if e["name"] == "c10d::allreduce_" and e["args"]["phase"] == "forward"
        ]
        assert len(logged) == 3
        assert all(e["args"]["fqn"] == "Global" and e["args"]["bytes"] == 4 for e in logged)


def test_ddp_gloo_work_carries_its_issuers_attribution(ddp):
    for trace in ddp["traces"]:
        ps = pairs(trace)
        assert len(ps) == len(issuers(trace))
        for issuer, work in ps:
            assert attribution(work) == attribution(issuer), (issuer, work)
            assert work["ts"] >= issuer["ts"]
        grad_works = [w for _, w in ps if w["args"]["phase"] == "backward"]
        assert len(grad_works) == 1 + 2 * len(ddp["ddp"]["buckets"])
        assert all(w["name"] == "gloo:all_reduce" for w in grad_works)
        assert all(
            w["args"]["fqn"].startswith("DistributedDataParallel.module.") for w in grad_works
        )


def test_ddp_summary_books_communication_per_module(ddp):
    for trace, summary in zip(ddp["traces"], ddp["summaries"]):
        expect = {}
        for e in issuers(trace):
            key = (e["args"]["fqn"], e["args"]["phase"])
            count, nbytes, _ = expect.get(key, (0, 0, 0.0))
            expect[key] = (count + 1, nbytes + e["args"]["bytes"], 0.0)
        for w in works(trace):
            key = (w["args"]["fqn"], w["args"]["phase"])
            count, nbytes, ms = expect[key]
            expect[key] = (count, nbytes, ms + w["dur"] / 1000)
        got = {}
        for fqn, row in summary["modules"].items():
            for phase in ("forward", "backward", "recompute"):
                cell = row.get(phase)
                if cell and cell.get("collectives"):
                    got[(fqn, phase)] = (cell["collectives"], cell["comm_bytes"], cell["comm_ms"])
        assert set(got) == set(expect)
        for key, (count, nbytes, ms) in expect.items():
            assert got[key][:2] == (count, nbytes), key
            assert got[key][2] == pytest.approx(ms, rel=1e-3, abs=2e-3), key


# ---------------------------------------------------------------------------------------------
# FSDP2: which block each collective serves, from FSDP's own record_function labels
# ("FSDP::all_gather (blocks.1)", "FSDP::post_backward_reduce (blocks.0)"; no suffix = root).

ROOT = "FSDPTinyLM"


def served(event, trace):
    """The module a c10d op works for, read from the innermost enclosing FSDP label."""
    labels = [
        e
        for e in xs(trace)
        if e["name"].startswith(("FSDP::all_gather", "FSDP::post_backward_reduce"))
        and not e["name"].startswith("FSDP::all_gather_copy_out")
        and inside(event, e)
    ]
    assert labels, event
    label = max(labels, key=lambda e: e["ts"])["name"]
    m = re.search(r"\((.+)\)$", label)
    return f"{ROOT}.{m.group(1)}" if m else ROOT


def fsdp_collectives(trace):
    """{(kind, phase-by-FSDP): [(issuer, served module)]}; FSDP's phase comes from the label."""
    out = {}
    for e in issuers(trace):
        if e["name"] == "c10d::_allgather_base_":
            fwd = not any(
                inside(e, p)
                for p in xs(trace)
                if p["name"].startswith(("FSDP::pre_backward", "FSDP::backward_prefetch"))
            )
            key = ("allgather", "forward" if fwd else "backward")
        elif e["name"] == "c10d::_reduce_scatter_base_":
            key = ("reduce_scatter", "backward")
        else:
            continue
        out.setdefault(key, []).append((e, served(e, trace)))
    return out


def test_fsdp2_issues_the_expected_collectives(fsdp):
    blocks = [f"{ROOT}.blocks.0", f"{ROOT}.blocks.1"]
    for trace in fsdp["traces"]:
        c = fsdp_collectives(trace)
        n = 2  # steps
        assert [m for _, m in c[("allgather", "forward")]] == ([ROOT] + blocks) * n
        # Backward re-gathers the resharded blocks (the root keeps its parameters), last first,
        assert [m for _, m in c[("allgather", "backward")]] == blocks[::-1] * n
        # and reduce-scatters each block's gradients, then the root's.
        assert [m for _, m in c[("reduce_scatter", "backward")]] == (blocks[::-1] + [ROOT]) * n
        for e in issuers(trace):
            assert e["args"]["group_size"] == WORLD and e["args"]["bytes"] > 0, e


def test_fsdp2_forward_all_gathers_name_the_block_they_gather_for(fsdp):
    # fqntrace's global pre-hook opens the module's scope before FSDP's own pre-forward hook
    # (global hooks run first), so the all-gather runs inside the block it serves.
    for trace in fsdp["traces"]:
        gathers = fsdp_collectives(trace)[("allgather", "forward")]
        for e, module in gathers:
            assert (e["args"]["fqn"], e["args"]["phase"]) == (module, "forward"), e
        ps = {id(i): w for i, w in pairs(trace, kinds=["allgather"])}
        for e, module in gathers:
            assert attribution(ps[id(e)]) == attribution(e)


def test_fsdp2_explicit_prefetch_all_gathers_name_the_block_they_serve(fsdp_prefetch):
    # set_modules_to_forward_prefetch: blocks.1's all-gather is issued inside blocks.0's forward
    # (its pre-forward hook); backward prefetch: blocks.0's inside blocks.1's pre-backward.
    blocks = [f"{ROOT}.blocks.0", f"{ROOT}.blocks.1"]
    for trace in fsdp_prefetch["traces"]:
        c = fsdp_collectives(trace)
        assert [m for _, m in c[("allgather", "forward")]] == ([ROOT] + blocks) * 2
        prefetched = [e for e in xs(trace) if e["name"] == "FSDP::forward_prefetch for blocks.1"]
        assert len(prefetched) == 2
        for e in prefetched:
            assert e["args"]["fqn"] == f"{ROOT}.blocks.0"  # where it was issued from
        for phase in ("forward", "backward"):
            for e, module in c[("allgather", phase)]:
                assert (e["args"]["fqn"], e["args"]["phase"]) == (module, phase), e


def test_fsdp2_block_reduce_scatters_name_their_block(fsdp):
    # Issued by RegisterPostBackwardFunction's backward node, which the block's pre-forward hook
    # created inside the block's scope: the node, and the reduce-scatter, belong to the block.
    for trace in fsdp["traces"]:
        scatters = fsdp_collectives(trace)[("reduce_scatter", "backward")]
        blocks = [(e, m) for e, m in scatters if m != ROOT]
        assert len(blocks) == 4
        for e, module in blocks:
            assert (e["args"]["fqn"], e["args"]["phase"]) == (module, "backward"), e


def test_fsdp2_backward_all_gathers_name_the_block_they_serve(fsdp):
    for trace in fsdp["traces"]:
        for e, module in fsdp_collectives(trace)[("allgather", "backward")]:
            assert (e["args"]["fqn"], e["args"]["phase"]) == (module, "backward"), e


def test_fsdp2_root_reduce_scatter_names_the_root(fsdp):
    for trace in fsdp["traces"]:
        roots = [e for e, m in fsdp_collectives(trace)[("reduce_scatter", "backward")] if m == ROOT]
        assert len(roots) == 2
        for e in roots:
            assert e["args"]["fqn"] == ROOT, e


def test_fsdp2_reduce_scatters_are_backward(fsdp):
    for trace in fsdp["traces"]:
        for e, _ in fsdp_collectives(trace)[("reduce_scatter", "backward")]:
            assert e["args"]["phase"] == "backward", e


def test_fsdp2_reduce_scatter_work_carries_the_attribution(fsdp):
    for trace in fsdp["traces"]:
        for w in works(trace):
            assert w["args"]["group_size"] == WORLD and w["args"]["bytes"] > 0, w


def test_fsdp2_every_work_carries_its_issuers_attribution(fsdp):
    # The work inherits the issuer's kind too: gloo runs reduce_scatter_tensor as an all-reduce
    # ("gloo:all_reduce"), and that work still says reduce_scatter, with the issuer's bytes.
    for trace in fsdp["traces"]:
        ps = pairs(trace)
        assert {i["args"]["collective"] for i, _ in ps} == {
            "allgather",
            "reduce_scatter",
            "allreduce",
            "barrier",
        }
        for issuer, work in ps:
            assert attribution(work) == attribution(issuer), (issuer, work)
            assert work["ts"] >= issuer["ts"], (issuer, work)
        scatters = [w for i, w in ps if i["name"] == "c10d::_reduce_scatter_base_"]
        assert scatters and all(w["name"] == "gloo:all_reduce" for w in scatters)


def test_fsdp2_root_post_backward_runs_as_backward_of_the_root(fsdp):
    # Every op of the root's reduce (FSDP's final engine callback, outside every node and inside
    # the program's "step i" range opened in forward) is the root's backward work.
    for trace in fsdp["traces"]:
        labels = [e for e in xs(trace) if e["name"] == "FSDP::post_backward_reduce"]
        assert len(labels) == 2
        for label in labels:
            assert (label["args"]["fqn"], label["args"]["phase"]) == (ROOT, "backward")
            inner = [e for e in xs(trace) if e is not label and inside(e, label)]
            assert any(e["name"] == "c10d::_reduce_scatter_base_" for e in inner)
            for e in inner:
                assert (e["args"]["fqn"], e["args"]["phase"]) == (ROOT, "backward"), e


def test_fsdp2_serve_scopes_stay_out_of_the_trace(fsdp):
    for trace in fsdp["traces"]:
        assert not [e for e in trace["traceEvents"] if "fqntrace::serve" in e.get("name", "")]


def test_fsdp2_loss_all_reduce_work_carries_its_issuer(fsdp):
    for trace in fsdp["traces"]:
        logged = [e for e in issuers(trace) if e["name"] == "c10d::allreduce_"]
        assert len(logged) == 2
        for issuer in logged:
            # the work gloo starts for it: the first all-reduce work after it was issued
            work = min(
                (
                    w
                    for w in works(trace)
                    if w["name"] == "gloo:all_reduce" and w["ts"] >= issuer["ts"]
                ),
                key=lambda w: w["ts"],
            )
            assert attribution(work) == attribution(issuer), (issuer, work)


# ---------------------------------------------------------------------------------------------
# every trace validates; depth and self time against the slices' times alone


def time_nesting(trace):
    """From the times alone (integer ns, per thread; equal extents: the later in the file is
    the outer one, as the core writes a range when it ends): [(event, parent event or None)]."""
    by_thread = {}
    for k, e in enumerate(trace["traceEvents"]):
        if e.get("ph") == "X" and e.get("cat") != "module_span":  # module tracks: a view
            start = round(e["ts"] * 1000)
            by_thread.setdefault((e["pid"], e["tid"]), []).append(
                (start, -(start + round(e["dur"] * 1000)), -k, e)
            )
    out = []
    for slices in by_thread.values():
        slices.sort(key=lambda s: s[:3])
        stack = []
        for start, neg_end, _, e in slices:
            # inside the top: ends by its end, and starts before it ends (or where it starts)
            while stack and not (
                -neg_end <= -stack[-1][1] and (start < -stack[-1][1] or start == stack[-1][0])
            ):
                stack.pop()
            out.append((e, stack[-1][3] if stack else None))
            stack.append((start, neg_end, None, e))
    return out


def self_times(trace):
    """{(fqn, phase): ns}: each op that starts a new (fqn, phase) below the enclosing op (or has
    none) owns its time, less the time of such ops directly inside it."""
    nesting = time_nesting(trace)
    parent = {id(e): p for e, p in nesting}
    ops = [e for e, _ in nesting if e.get("cat") == "cpu_op"]

    def key(e):
        return e["args"]["fqn"], e["args"]["phase"]

    def op_above(e):
        p = parent[id(e)]
        while p is not None and p.get("cat") != "cpu_op":
            p = parent[id(p)]
        return p

    owners = {}
    sums = {}
    for e in ops:
        above = op_above(e)
        if above is None or key(above) != key(e):
            owners[id(e)] = e
            sums[key(e)] = sums.get(key(e), 0) + round(e["dur"] * 1000)
            while above is not None and id(above) not in owners:
                above = op_above(above)
            if above is not None:
                sums[key(above)] -= round(e["dur"] * 1000)
    return sums


@pytest.mark.parametrize("run", ["ddp", "fsdp", "fsdp_prefetch"])
def test_traces_validate_and_depth_is_the_nesting(run, request):
    fixture = request.getfixturevalue(run)
    d = fixture.get("dir")
    for rank, trace in enumerate(fixture["traces"]):
        for e, p in time_nesting(trace):
            if "depth" in e.get("args", {}):
                expected = 0 if p is None else p["args"]["depth"] + 1
                assert e["args"]["depth"] == expected, (rank, e, p)
        if d is not None:
            out = cli("validate", d / f"run.{rank}.json").stdout
            assert out.startswith("ok:"), out


def test_fsdp2_summary_self_times_equal_the_time_nesting(fsdp):
    for rank in range(WORLD):
        trace = fsdp["traces"][rank]
        summary = json.loads(cli("summary", fsdp["dir"] / f"run.{rank}.json", "--json").stdout)
        oracle = self_times(trace)
        assert oracle
        for (fqn, phase), ns in oracle.items():
            got = summary["modules"][fqn][phase]["self_ms"]
            assert got == pytest.approx(ns / 1e6, abs=2e-3), (rank, fqn, phase)
        for fqn, module in summary["modules"].items():  # a total is its subtree's self times
            for phase in ("forward", "backward", "recompute"):
                subtree = sum(
                    ns
                    for (f, p), ns in oracle.items()
                    if p == phase and (f == fqn or f.startswith(fqn + "."))
                )
                assert module[phase]["total_ms"] == pytest.approx(subtree / 1e6, abs=5e-3), (
                    rank,
                    fqn,
                    phase,
                )


# ---------------------------------------------------------------------------------------------
# merge, HTA


def cli(*args, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", "fqntrace", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_merge_puts_ranks_on_rows_with_aligned_clocks(ddp, tmp_path):
    d = ddp["dir"]
    out = tmp_path / "merged.json"
    cli("merge", d / "run.0.json", d / "run.1.json", "-o", out)
    assert cli("validate", out).stdout.startswith("ok:")
    merged = load(out)
    rows = {
        e["pid"]: e["args"]["name"]
        for e in merged["traceEvents"]
        if e.get("name") == "process_name"
    }
    assert rows == {0: "rank 0", 1: "rank 1"}
    by_rank = {r: [e for e in xs(merged) if e["pid"] == r] for r in range(WORLD)}
    assert [len(by_rank[r]) for r in range(WORLD)] == [len(xs(t)) for t in ddp["traces"]]

    # Times are on one clock: the earliest base; each rank shifted by its own base.
    base = min(t["baseTimeNanoseconds"] for t in ddp["traces"])
    assert merged["baseTimeNanoseconds"] == base
    for r, trace in enumerate(ddp["traces"]):
        shift = (trace["baseTimeNanoseconds"] - base) / 1000
        first = min(xs(trace), key=lambda e: (e["ts"], e["name"]))
        twin = min(by_rank[r], key=lambda e: (e["ts"], e["name"]))
        assert twin["name"] == first["name"]
        assert twin["ts"] == pytest.approx(first["ts"] + shift, abs=1e-3)

    # Aligned: the same step overlaps across ranks, and so does every collective's work (a ring
    # all-reduce cannot finish on one rank before the other rank has joined it).
    def overlap(a, b):
        return a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"]

    per_rank = []
    for r in range(WORLD):
        sub = {"traceEvents": by_rank[r]}
        per_rank.append((steps(sub), works(sub)))
    (steps0, works0), (steps1, works1) = per_rank
    assert sorted(steps0) == sorted(steps1) == [0, 1, 2]
    for i in steps0:
        assert overlap(steps0[i], steps1[i]), i
    assert len(works0) == len(works1)
    for kind in {w["args"]["collective"] for w in works0}:
        w0 = [w for w in works0 if w["args"]["collective"] == kind]
        w1 = [w for w in works1 if w["args"]["collective"] == kind]
        assert len(w0) == len(w1), kind
        # gloo runs two works at once on its two threads, so two neighbours may start in either
        # order on either rank: the n-th work of a rank pairs with the other rank's n-1-th, n-th
        # or n+1-th, one to one.
        unmatched = match_neighbours(w0, w1, overlap)
        assert not unmatched, [(w0[i]["ts"], w0[i]["dur"], w0[i]["args"]) for i in unmatched]


def match_neighbours(left, right, fits, reach=1):
    """Indices of `left` left without a partner in a one-to-one matching of left[i] with some
    right[j], |i - j| <= reach, fits(left[i], right[j]) (augmenting paths; the lists are short)."""
    partner = {}

    def place(i, seen):
        for j in range(max(0, i - reach), min(len(right), i + reach + 1)):
            if j in seen or not fits(left[i], right[j]):
                continue
            seen.add(j)
            if j not in partner or place(partner[j], seen):
                partner[j] = i
                return True
        return False

    return [i for i in range(len(left)) if not place(i, set())]


def test_holistic_trace_analysis_reads_the_ranks_as_one_job(ddp, tmp_path):
    hta = pytest.importorskip("hta.trace_analysis")
    # HTA reads every *.json (or .gz) in the folder and takes the rank from the first
    # `"rank": N` in it; the names do not matter. Summaries ("rank": 0 too) and other JSON must
    # stay out of the folder, or they replace a rank's trace.
    folder = tmp_path / "traces"
    folder.mkdir()
    for r in range(WORLD):
        shutil.copy(ddp["dir"] / f"run.{r}.json", folder / f"run.{r}.json")
    # The traces have ProfilerStep ranges (one per optimizer step): HTA leaves out the last
    # step's events unless told, as for Kineto's traces.
    analysis = hta.TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True)
    assert analysis.t.get_ranks() == [0, 1]
    symbols = analysis.t.symbol_table.get_sym_table()
    for r in range(WORLD):
        frame = analysis.t.get_trace(r)
        events = xs(ddp["traces"][r])
        # HTA keeps the CPU events that start by the last ProfilerStep's end; it compares the
        # ranks' aligned ts with that end unaligned, so whether it keeps the job's closing events
        # after the last step (the final barrier) depends on the second the ranks started (CI saw
        # 4367 of 4368 once). Every event inside the steps must be there.
        last_end = max(e["ts"] + e["dur"] for e in events if e["name"].startswith("ProfilerStep#"))
        inside = [e for e in events if e["ts"] <= last_end]
        assert len(inside) <= len(frame) <= len(events)
        names = {symbols[i] for i in frame["name"].unique()}
        assert {
            "c10d::allreduce_",
            "gloo:all_reduce",
            "nn.Module: DistributedDataParallel",
        } <= names


# ---------------------------------------------------------------------------------------------
# a rank dies


def test_sigkilled_rank_leaves_both_files_repairable(tmp_path):
    # Rank 1 sleeps 1.5 s at the start of step 3, then SIGKILLs itself; rank 0 blocks in step 3's
    # gradient all-reduce, gets gloo's "Connection closed by peer" and is sent SIGTERM by
    # torchrun. Neither process runs its exit handlers, so neither file gets its closing tail.
    proc = torchrun(
        tmp_path,
        str(tmp_path / "run.{rank}.json"),
        "--mode",
        "ddp",
        "--steps",
        "6",
        "--kill-rank",
        "1",
        "--kill-step",
        "3",
        expect_ok=False,
    )
    assert proc.returncode != 0
    assert "rank 1: SIGKILL at step 3" in proc.stdout
    assert "exitcode  : -9" in proc.stdout  # rank 1
    files = sorted(os.listdir(tmp_path))
    assert files == ["run.0.json", "run.1.json"]
    for r in range(WORLD):
        path = tmp_path / f"run.{r}.json"
        with open(path) as f:
            text = f.read()
        complete = '"complete": true' in text[-200:]
        if r == 1:
            assert not complete
        if not complete:
            with pytest.raises(json.JSONDecodeError):
                json.loads(text)
            # Both processes sat idle for over a second before they died, so everything they
            # recorded had been drained: the file stops after a whole event line.
            last = json.loads(text.rstrip().splitlines()[-1].rstrip(","))
            assert last["ph"] in ("X", "s", "f", "M"), last
            bad = cli("validate", path, check=False)
            assert bad.returncode == 1 and "repair" in bad.stderr
            cli("repair", path)
        assert cli("validate", path).stdout.startswith("ok:")
        trace = load(path)
        assert trace["distributedInfo"]["rank"] == r
        # Everything up to the moment the job stopped is there: the three finished steps with
        # their gradient all-reduces (1 bucket in step 0, then the rebuilt buckets).
        # Step 3 may be there too: the rank that was not killed can unwind its step 3 range
        # (gloo raises once the peer is gone) before torchrun's SIGTERM ends it.
        assert sorted(steps(trace))[:3] == [0, 1, 2] and set(steps(trace)) <= {0, 1, 2, 3}
        grads = [e for e in issuers(trace) if e["name"] == "c10d::allreduce_"]
        finished = [e for e in grads if step_of(e, trace) in (0, 1, 2)]
        assert len(finished) == 1 + 2 * 8, len(finished)
        if r == 0:
            # rank 0 got into step 3 and issued its all-reduces before blocking on them
            late = [e for e in grads if e["ts"] > steps(trace)[2]["ts"] + steps(trace)[2]["dur"]]
            assert len(late) == 8
            assert all(e["args"]["phase"] == "backward" for e in late)


# A process group started without torchrun (no WORLD_SIZE in the environment, as under
# mp.spawn): once init_process_group returns, collectives carry their bytes and group size too.
def test_process_group_without_torchrun_env_gets_bytes(tmp_path):
    from conftest import run_python

    code = (
        "import torch, torch.distributed as dist\n"
        f"store = dist.FileStore({str(tmp_path / 'store')!r}, 1)\n"
        "dist.init_process_group('gloo', store=store, rank=0, world_size=1)\n"
        "t = torch.ones(10)\n"
        "dist.all_reduce(t)\n"
        "dist.destroy_process_group()\n"
    )
    trace_path = tmp_path / "single.json"
    env = {"FQNTRACE": str(trace_path)}
    env.update({k: "" for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK")})
    proc = run_python(code, env, check_rc=0)
    trace = load(trace_path)
    assert trace["distributedInfo"]["backend"] == "gloo", proc.stderr
    [issuer] = [e for e in issuers(trace) if e["name"] == "c10d::allreduce_"]
    assert (issuer["args"]["bytes"], issuer["args"]["group_size"]) == (40, 1)
    [work] = [w for w in works(trace) if w["name"] == "gloo:all_reduce"]
    assert attribution(work) == attribution(issuer)


# The observer's per-thread pointer cache notes which ops need more than the common start; FLOP
# ops do exactly while the callback asks for inputs. A process group turns the inputs on in the
# middle of a run (above): ops the cache already knew must count their FLOPs from then on, as
# with FQNTRACE_SHAPES=1 (the cache starts a new epoch; docs/trace-format.md).
def test_inputs_turned_on_mid_run_reach_ops_the_cache_knew(tmp_path):
    from conftest import run_python

    code = (
        "import torch, torch.distributed as dist\n"
        "a, b = torch.ones(8, 8), torch.ones(8, 8)\n"
        "for _ in range(3): torch.mm(a, b)\n"
        f"store = dist.FileStore({str(tmp_path / 'store')!r}, 1)\n"
        "dist.init_process_group('gloo', store=store, rank=0, world_size=1)\n"
        "for _ in range(3): torch.mm(a, b)\n"
        "dist.destroy_process_group()\n"
    )
    trace_path = tmp_path / "mid.json"
    env = {"FQNTRACE": str(trace_path), "FQNTRACE_FLOPS": "0"}
    env.update({k: "" for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK")})
    run_python(code, env, check_rc=0)
    mms = sorted(
        (e for e in load(trace_path)["traceEvents"] if e.get("name") == "aten::mm"),
        key=lambda e: e["ts"],
    )
    assert [e["args"].get("flops") for e in mms] == [None] * 3 + [2 * 8 * 8 * 8] * 3
