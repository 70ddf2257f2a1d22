"""Memory of the shared local LLM on the jetrover profile: resident size measured, not guessed.

``glove-ros bench llm_memory [--model NAME|PATH] [--threads 2]`` runs, on this machine:

1. every node of the ``jetrover`` deployment as its own process, as ``glove-ros launch
   jetrover`` starts them (``config/jetrover.yaml``, the stock robot arguments, a bundled
   site, databases in a temporary folder); no robot drivers, so the nodes idle. The llm
   node runs the model on the CPU (``n_gpu_layers: 0``);
2. RSS (``VmRSS`` of ``/proc/<pid>/status``) of every process once they are up -- the llm
   node with no model loaded;
3. through the llm node's ``llm/complete`` (:class:`glove_ros.nodes.llm_client.ServiceLlm`,
   the client the planner, plan gate and consolidation node use) a few cases of each job of
   ``glove-ros bench llm`` (waypoint, parse, reflect, consolidate): the llm node's RSS after
   the first request and after all jobs, its peak (``VmHWM``), the longest prompt each job
   sent, every reply;
4. ``llm/release``: RSS after it; one more request (the model loads again) and RSS; release;
5. the llm node once more with ``n_ctx: 4096`` (what ``glove-ros bench llm`` ran), the same
   waypoint and parse cases: its RSS loaded, and whether every reply is identical to the
   replies at the sized context.

Writes ``bench/results/llm_memory.json`` (+ ``.png``). x86 CPU figures: nothing here runs on
a Jetson; docs/robot.md turns them into an estimate for an 8 GB Orin Nano and says which
part is estimated.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from glove_ros.benchmarks import write_results
from glove_ros.core.llm.shared import rss_mb
from glove_ros.procs import private_ros_domain, stop_process, wait_until

SETTINGS_4096 = {"n_ctx": 4096}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``glove-ros bench llm_memory``."""
    parser.add_argument("--model", default="",
                        help="model name or .gguf path (default: the llm node's model_path in "
                             "config/jetrover.yaml)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads (default 2)")
    parser.add_argument("--cases", type=int, default=4,
                        help="waypoint and parse cases (default 4 each)")
    parser.add_argument("--small-cases", type=int, default=1,
                        help="reflect and consolidate cases (default 1 each)")
    parser.add_argument("--seed", type=int, default=1000, help="case generator seed")
    parser.add_argument("--settle", type=float, default=20.0,
                        help="seconds the idle graph runs before it is measured (default 20)")
    parser.add_argument("--no-graph", action="store_true",
                        help="start only the llm node (no idle jetrover nodes)")
    parser.add_argument("--no-compare", action="store_true",
                        help="skip the n_ctx 4096 run")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--json", action="store_true", help="print the JSON document")


# --------------------------------------------------------------------------------------------
# processes


def _rss(pid: int, field: str = "VmRSS") -> float | None:
    try:
        return round(rss_mb(pid, field=field), 1)
    except (OSError, ValueError):
        return None


def _split(pid: int) -> dict[str, float | None]:
    """RSS split: anonymous (heap: KV cache, compute and repacked weight buffers) and
    file-backed (the memory-mapped GGUF pages, shared libraries)."""
    return {"anon": _rss(pid, "RssAnon"), "file": _rss(pid, "RssFile")}


class _Graph:
    """The jetrover node processes, each with its log."""

    def __init__(self, tmp: Path, params_file: str, site: str, llm_overrides: Mapping[str, Any],
                 only: Sequence[str] = ()) -> None:
        from glove_ros import graph

        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        dep = graph.deployment("jetrover")
        db = str(tmp / "jetrover_memory.db")
        overrides: dict[str, dict[str, Any]] = {
            "memory": {"db_path": db}, "plan_gate": {"db_path": db},
            "consolidation": {"db_path": db}, "llm": dict(llm_overrides)}
        for spec in dep.nodes:
            if only and spec.name not in only:
                continue
            cmd = graph.process_command(spec, params_file, overrides.get(spec.name, {}),
                                        deployment_name="jetrover", robot={"site": site})
            log = tmp / f"{spec.name}.{len(list(tmp.glob(spec.name + '.*.log')))}.log"
            self.logs[spec.name] = log
            self.procs[spec.name] = subprocess.Popen(
                cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT)  # noqa: SIM115

    def dead(self) -> dict[str, str]:
        """Processes that exited, with the end of their log."""
        return {n: self.logs[n].read_text(errors="replace")[-1500:]
                for n, p in self.procs.items() if p.poll() is not None}

    def stop(self) -> dict[str, int]:
        """SIGINT every process (llm node last); their exit codes."""
        order = sorted(self.procs, key=lambda n: n == "llm")
        return {n: stop_process(self.procs[n], 20.0) for n in order}


# --------------------------------------------------------------------------------------------
# the client side


class _Recorder:
    """A JsonLlm that forwards to ``llm`` and keeps every result (prompt sizes, replies)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.results: list[Any] = []

    def count_tokens(self, text: str) -> int:
        return int(self.llm.count_tokens(text))

    def complete_json(self, messages: Any, schema: Any, max_tokens: int | None = None,
                      **kw: Any) -> Any:
        res = self.llm.complete_json(messages, schema, max_tokens, **kw)
        self.results.append(res)
        return res

    def summary(self) -> dict[str, Any]:
        ok = [r for r in self.results if r.ok]
        return {"calls": len(self.results), "ok": len(ok),
                "max_prompt_tokens": max((r.prompt_tokens for r in self.results), default=0),
                "max_completion_tokens": max((r.tokens for r in self.results), default=0),
                "errors": sorted({str(r.error) for r in self.results if not r.ok})[:5]}


def _jobs(client: Any, args: argparse.Namespace, which: Sequence[str]) -> dict[str, Any]:
    """Run the benchmark's own jobs through ``client``; per job a summary and the replies."""
    from glove_ros.benchmarks import llm as bench
    from glove_ros.core.plan.tasks import INTENTS

    out: dict[str, Any] = {}
    timeout = 600.0  # latency is not what is measured here
    for job in which:
        rec = _Recorder(client.with_purpose({"waypoint": "plan"}.get(job, job)))
        t0 = time.monotonic()
        if job == "waypoint":
            rng = random.Random(args.seed)
            cases = [bench.waypoint_case(rng, bench.WAYPOINT_KINDS[i % len(bench.WAYPOINT_KINDS)])
                     for i in range(args.cases)]
            st = bench.run_waypoint(rec, cases, timeout)
        elif job == "parse":
            rng = random.Random(args.seed + 1)
            intents = [i for i in INTENTS if i in bench._PARSE_TEMPLATES]
            pc = [bench.parse_case(rng, intents[i % len(intents)]) for i in range(args.cases)]
            st = bench.run_parse(rec, pc, timeout)
        elif job == "reflect":
            st = bench.run_reflect(rec, bench._reflect_cases(random.Random(args.seed + 2),
                                                             args.small_cases), timeout)
        else:
            cc = bench._consolidate_cases(random.Random(args.seed + 3), args.small_cases)
            try:
                st = bench.run_consolidate(rec, cc, timeout)
            finally:
                for store, *_ in cc:
                    store.close()
        out[job] = {**rec.summary(), "correct": st.correct, "cases": st.n,
                    "wall_s": round(time.monotonic() - t0, 1),
                    "replies": [r.raw_text for r in rec.results]}
    return out


def _warm(node: Any, graph: _Graph, timeout: float = 60.0) -> None:
    """Send a request the llm node refuses at once (max_tokens too large: nothing loads)
    until one is answered: right after discovery an answer can be lost, and a job's
    request must not be the one."""
    from glove_ros.nodes.llm_client import ServiceLlm

    probe = ServiceLlm(node, "llm/complete", purpose="warm-up", max_tokens=1 << 30,
                       timeout_s=1.0, wait_s=2.0, discover_s=2.0)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        res = probe.complete_json([{"role": "user", "content": "ping"}], {"type": "string"})
        if res.error and "max_tokens must be in" in res.error:
            return
        if graph.dead():
            raise RuntimeError(f"a node exited: {graph.dead()}")
    raise RuntimeError("the llm node did not answer a warm-up request in 60 s")


def _client_node() -> tuple[Any, Any, Any]:
    import rclpy
    from rclpy.executors import MultiThreadedExecutor

    from glove_ros.nodes.common import BackgroundSpinner

    rclpy.init()
    node = rclpy.create_node("bench_llm_memory")
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(node)
    return rclpy, node, BackgroundSpinner(executor)


# --------------------------------------------------------------------------------------------
# the run


def _llm_section(params_file: Path) -> dict[str, Any]:
    data = yaml.safe_load(params_file.read_text())
    return dict(data["/**/llm"]["ros__parameters"])


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Run the measurement (see the module docstring); the JSON document."""
    from glove_ros.core.llm.models import resolve_model
    from glove_ros.nodes.llm_client import ServiceLlm
    from glove_ros.nodes.llm_node import PARAMS, n_ctx_of
    from glove_ros.paths import resolve_config, resolve_world

    params_file = resolve_config("jetrover")
    section = _llm_section(params_file)
    model = args.model or str(section.get("model_path", ""))
    gguf = resolve_model(model)
    llm_over = {"model_path": str(gguf), "n_threads": args.threads, "n_gpu_layers": 0}
    values = {p.name: p.default for p in PARAMS} | section | llm_over
    n_ctx = n_ctx_of(values)
    site = str(resolve_world("jetrover_maze"))
    tmp = Path(tempfile.mkdtemp(prefix="glove_bench_llm_memory_"))
    doc: dict[str, Any] = {
        "benchmark": "llm_memory", "model": gguf.name, "model_path": str(gguf),
        "gguf_bytes": gguf.stat().st_size, "threads": args.threads, "seed": args.seed,
        "llm_settings": {k: values[k] for k in ("n_ctx", "max_prompt_tokens", "max_tokens",
                                                "temperature", "seed", "prefix_cache_mb")},
        "n_ctx": n_ctx, "machine": platform.machine(), "cpus": os.cpu_count(),
        "jetson": Path("/etc/nv_tegra_release").exists(),
        "note": "x86 CPU build of llama.cpp, n_gpu_layers 0; nothing measured on a Jetson",
    }
    try:
        import llama_cpp

        doc["llama_cpp_python"] = getattr(llama_cpp, "__version__", "?")
    except ImportError:
        doc["llama_cpp_python"] = None
    rclpy, node, spinner = _client_node()
    graph = None
    try:
        graph = _Graph(tmp, str(params_file), site, llm_over,
                       only=("llm",) if args.no_graph else ())
        client = ServiceLlm(node, "llm/complete", purpose="bench", max_tokens=256,
                            timeout_s=120.0, wait_s=120.0, discover_s=5.0)
        wait_until(lambda: client.service_is_ready() or bool(graph.dead()), 180,
                   "the llm node's llm/complete service", poll=0.1)
        if graph.dead():
            raise RuntimeError(f"a node exited at start: {graph.dead()}")
        _warm(node, graph)
        time.sleep(args.settle)  # every node configured and active, caches warm
        dead = graph.dead()
        idle = {n: _rss(p.pid) for n, p in graph.procs.items()}
        doc["idle_rss_mb"] = idle
        doc["idle_nodes_alive"] = {n: n not in dead for n in graph.procs}
        doc["graph_idle_total_mb"] = round(sum(v or 0.0 for v in idle.values()), 1)
        llm_pid = graph.procs["llm"].pid
        states: dict[str, Any] = {"idle": idle["llm"]}
        split: dict[str, Any] = {"idle": _split(llm_pid)}
        jobs = _jobs(client, args, ("waypoint",))  # its first request loads the model
        states["after_first_job"] = _rss(llm_pid)
        split["after_first_job"] = _split(llm_pid)
        jobs |= _jobs(client, args, ("parse",))
        states["after_waypoint_parse"] = _rss(llm_pid)
        split["after_waypoint_parse"] = _split(llm_pid)  # the jobs the 4096 run repeats
        jobs |= _jobs(client, args, ("reflect", "consolidate"))
        states["after_all_jobs"] = _rss(llm_pid)
        split["after_all_jobs"] = _split(llm_pid)
        states["peak_vmhwm"] = _rss(llm_pid, "VmHWM")
        ok, text = client.release()
        time.sleep(1.0)
        states["after_release"] = _rss(llm_pid)
        split["after_release"] = _split(llm_pid)
        states["release_message"] = text if ok else f"FAILED: {text}"
        again = _jobs(client, argparse.Namespace(**{**vars(args), "cases": 1}), ("waypoint",))
        states["after_reload"] = _rss(llm_pid)
        split["after_reload"] = _split(llm_pid)
        states["reload_ok"] = again["waypoint"]["ok"] == 1
        client.release()
        time.sleep(1.0)
        states["after_second_release"] = _rss(llm_pid)
        split["after_second_release"] = _split(llm_pid)
        doc["llm_rss_mb"] = states
        doc["llm_rss_split_mb"] = split
        doc["jobs"] = jobs
        codes = graph.stop()
        doc["exit_codes"] = codes
        graph = None
        if not args.no_compare:
            doc["n_ctx_4096"] = _compare(tmp, str(params_file), site, llm_over, client, args,
                                         jobs)
    finally:
        if graph is not None:
            graph.stop()
        spinner.stop()
        node.destroy_node()
        rclpy.try_shutdown()
    shutil.rmtree(tmp, ignore_errors=True)  # kept (with the nodes' logs) when a step failed
    return doc


def _compare(tmp: Path, params_file: str, site: str, llm_over: Mapping[str, Any], client: Any,
             args: argparse.Namespace, jobs: Mapping[str, Any]) -> dict[str, Any]:
    """The llm node alone with n_ctx 4096: RSS loaded and the same replies or not."""
    g = _Graph(tmp, params_file, site, {**llm_over, **SETTINGS_4096}, only=("llm",))
    try:
        time.sleep(3.0)  # the previous node's service may still be listed: let it go
        wait_until(lambda: client.service_is_ready() or bool(g.dead()), 120,
                   "the n_ctx 4096 llm node", poll=0.1)
        _warm(client._node, g)
        pid = g.procs["llm"].pid
        idle = _rss(pid)
        again = _jobs(client, args, ("waypoint", "parse"))
        loaded = _rss(pid)
        loaded_split = _split(pid)
        same = {j: again[j]["replies"] == jobs[j]["replies"] for j in again}
        return {"idle": idle, "after_waypoint_parse": loaded,
                "after_waypoint_parse_split": loaded_split, "peak_vmhwm": _rss(pid, "VmHWM"),
                "replies_identical": same, "replies": {j: again[j]["replies"] for j in again}}
    finally:
        g.stop()


# --------------------------------------------------------------------------------------------
# report


def _table(doc: Mapping[str, Any]) -> str:
    s = doc["llm_rss_mb"]
    lines = [f"model {doc['model']} ({doc['gguf_bytes'] / 1e6:.0f} MB file), n_ctx {doc['n_ctx']}"
             f", {doc['threads']} threads, {doc['machine']} CPU (not a Jetson)",
             "idle RSS per jetrover node (MB): " + ", ".join(
                 f"{n} {v:.0f}" for n, v in doc["idle_rss_mb"].items() if v is not None),
             f"idle graph total {doc['graph_idle_total_mb']:.0f} MB",
             f"llm node RSS: idle {s['idle']:.0f}, after first request {s['after_first_job']:.0f}"
             f", after all jobs {s['after_all_jobs']:.0f} (peak {s['peak_vmhwm']:.0f}), released "
             f"{s['after_release']:.0f}, reloaded {s['after_reload']:.0f}, released again "
             f"{s['after_second_release']:.0f} MB",
             "  of which anonymous / file-backed after all jobs: "
             f"{doc['llm_rss_split_mb']['after_all_jobs']['anon']:.0f} / "
             f"{doc['llm_rss_split_mb']['after_all_jobs']['file']:.0f} MB"]
    for job, j in doc["jobs"].items():
        lines.append(f"  {job:12s} {j['ok']}/{j['calls']} calls ok, longest prompt "
                     f"{j['max_prompt_tokens']} tokens, {j['correct']}/{j['cases']} correct")
    c = doc.get("n_ctx_4096")
    if c:
        lines.append(f"after waypoint + parse: {s['after_waypoint_parse']:.0f} MB at n_ctx "
                     f"{doc['n_ctx']}, {c['after_waypoint_parse']:.0f} MB at n_ctx 4096 (peak "
                     f"{c['peak_vmhwm']:.0f}); replies identical: {c['replies_identical']}")
    return "\n".join(lines)


def _plot(doc: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = doc["llm_rss_mb"]
    labels = [f"{n} (idle)" for n in doc["idle_rss_mb"] if n != "llm"]
    vals = [v or 0.0 for n, v in doc["idle_rss_mb"].items() if n != "llm"]
    for k in ("idle", "after_first_job", "after_waypoint_parse", "after_all_jobs",
              "after_release", "after_reload"):
        labels.append(f"llm: {k.replace('_', ' ')}")
        vals.append(s[k] or 0.0)
    c = doc.get("n_ctx_4096")
    if c:
        labels.append("llm: after waypoint parse, n_ctx 4096")
        vals.append(c["after_waypoint_parse"] or 0.0)
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(labels) + 1))
    n_idle = len(doc["idle_rss_mb"]) - 1
    ax.barh(labels, vals, color=["#999"] * n_idle + ["#4a7"] * (len(vals) - n_idle))
    ax.invert_yaxis()
    ax.set_xlabel("RSS, MB (x86, CPU)")
    ax.set_title(f"llm_memory: {doc['model']}, n_ctx {doc['n_ctx']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(args: argparse.Namespace) -> int:
    """Entry point of ``glove-ros bench llm_memory``."""
    from glove_ros.core.llm.models import ModelFileError

    if args.threads < 1 or args.cases < 1 or args.small_cases < 1 or args.settle < 0:
        print("bench llm_memory: --threads, --cases and --small-cases must be >= 1, "
              "--settle >= 0")
        return 2
    try:
        with private_ros_domain():
            doc = measure(args)
    except (ModelFileError, RuntimeError) as exc:
        print(f"error: {exc}")
        return 2
    return write_results(doc, args.out, "llm_memory", _plot, _table, args.json)

