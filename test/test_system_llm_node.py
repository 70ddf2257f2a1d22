"""The llm node as its own process over DDS, on a real GGUF through llama.cpp.

What must hold: nothing is loaded before the first request (RSS and /diagnostics say so);
a completion returns JSON valid against the request's schema; ``llm/release`` unloads the
model (RSS falls back) and the next request loads it again; malformed requests and a
prompt longer than the context are answered ``ok: false`` with a clear error and the node
keeps serving. The model is the small one tests use ($GLOVE_LLM_MODEL, conftest:
smollm2-135m, 98 MB): the node does not care which GGUF it holds, and this keeps the test
well under a minute on two cores.
"""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("rclpy")
pytestmark = [pytest.mark.ros, pytest.mark.llm, pytest.mark.slow, pytest.mark.timeout(240)]

from rosproc import Collector, NodeProcess, call, ros_client, wait_for  # noqa: E402

from glove_ros.core.llm.runtime import validate_json  # noqa: E402
from glove_ros.core.llm.shared import context_size, rss_mb  # noqa: E402

SCHEMA = {"type": "object",
          "properties": {"waypoint": {"type": "string", "enum": ["hall", "kitchen", "lab"]}},
          "required": ["waypoint"], "additionalProperties": False}
MSGS = [{"role": "system", "content": "You pick where a robot looks for a block. Reply JSON."},
        {"role": "user", "content": "The red block was last seen in the kitchen. Where now?"}]


@pytest.fixture(scope="module")
def model_path():
    pytest.importorskip("llama_cpp")
    from glove_ros.core.llm.models import ModelFileError, resolve_model

    try:
        return str(resolve_model(""))  # $GLOVE_LLM_MODEL (conftest: smollm2-135m)
    except ModelFileError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))


def _values(status) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}


def test_llm_node_loads_lazily_serves_releases_and_survives_bad_input(tmp_path, model_path):
    from diagnostic_msgs.msg import DiagnosticArray
    from std_srvs.srv import Trigger

    from glove_ros.srv import LlmComplete

    proc = NodeProcess("glove_ros.nodes.llm_node", tmp_path,
                       {"model_path": model_path, "n_ctx": 0, "max_prompt_tokens": 384,
                        "max_tokens": 64, "n_threads": 1})

    def req(messages=MSGS, schema=SCHEMA, max_tokens=24, purpose="plan"):
        return LlmComplete.Request(
            messages_json=messages if isinstance(messages, str) else json.dumps(messages),
            schema_json=schema if isinstance(schema, str) else json.dumps(schema),
            max_tokens=max_tokens, timeout_s=60.0, purpose=purpose)

    try:
        with ros_client("llm_node_test") as node:
            diag = Collector(node, DiagnosticArray, "/diagnostics")
            complete = node.create_client(LlmComplete, "llm/complete")
            release = node.create_client(Trigger, "llm/release")

            def status():
                mine = [s for m in list(diag.items) for s in m.status
                        if s.name == "glove_ros: /llm"]
                return _values(mine[-1]) if mine else None

            assert complete.wait_for_service(timeout_sec=60), proc.log()
            wait_for(lambda: status() is not None, 30, "the llm node's diagnostics", proc.log)
            idle = status()
            assert idle["loaded"] == "false" and idle["loads"] == "0", idle
            assert int(idle["n_ctx"]) == context_size(384, 64) == 512
            rss_idle = rss_mb(proc.proc.pid)

            # bad input first: refused before anything is loaded, the node stays up
            bad = call(node, complete, req(messages="not json"), timeout=30)
            assert not bad.ok and "messages_json is not JSON" in bad.error
            bad = call(node, complete, req(schema='{"type": "object", "pattern": "x"}'), 30)
            assert not bad.ok and "schema_json" in bad.error and "unsupported" in bad.error
            bad = call(node, complete, req(max_tokens=65), 30)
            assert not bad.ok and "max_tokens must be in 1..64" in bad.error
            assert bad.finish_reason == "refused" and proc.alive()
            assert rss_mb(proc.proc.pid) < rss_idle + 30, "a refused request loaded the model"

            first = call(node, complete, req(), timeout=120)
            assert first.ok, first.error
            value = json.loads(first.value_json)
            assert validate_json(value, SCHEMA) is None, value
            assert first.load_s > 0 and first.completion_tokens > 0 and first.n_ctx == 512
            rss_loaded = rss_mb(proc.proc.pid)
            assert rss_loaded > rss_idle + 60, (rss_idle, rss_loaded)

            second = call(node, complete, req(purpose="parse"), timeout=120)
            assert second.ok and second.load_s == 0.0, second.error

            long_prompt = [{"role": "user", "content": "kitchen hall lab " * 200}]
            bad = call(node, complete, req(messages=long_prompt), timeout=60)
            assert not bad.ok and "n_ctx 512" in bad.error and proc.alive()

            out = call(node, release, Trigger.Request(), timeout=60)
            assert out.success and "released" in out.message, out.message
            rss_released = rss_mb(proc.proc.pid)
            assert rss_released < rss_loaded - 60, (rss_loaded, rss_released)
            out = call(node, release, Trigger.Request(), timeout=60)
            assert out.success and "not loaded" in out.message

            again = call(node, complete, req(), timeout=120)
            assert again.ok and again.load_s > 0, again.error
            assert validate_json(json.loads(again.value_json), SCHEMA) is None

            def counted():
                s = status()
                return s is not None and s["loads"] == "2" and s["releases"] == "1"

            wait_for(counted, 10, "diagnostics counting two loads and one release", proc.log)
            s = status()
            assert s["loaded"] == "true" and s["requests_plan"] == "6" and s["requests_parse"] \
                == "1" and s["failures"] == "4", s
        assert proc.alive(), proc.log()
    finally:
        code = proc.stop()
    assert code == 0, proc.log()


def test_consolidation_uses_the_shared_model_and_releases_it_after_the_run(tmp_path,
                                                                            model_path):
    """consolidator: llm with llm.service: the run's tool calls go to the llm node, which
    loads the model for them; when the run ends the consolidation node calls llm/release."""
    from test_node_consolidation import _fill, _snapshot

    from glove_ros.action import Consolidate
    from glove_ros.nodes.common import SpinSafeActionClient

    db = str(tmp_path / "plan.db")
    _fill(db, 6)
    before = _snapshot(db)
    llm = NodeProcess("glove_ros.nodes.llm_node", tmp_path,
                      {"model_path": model_path, "n_threads": 1})
    cons = NodeProcess("glove_ros.nodes.consolidation_node", tmp_path,
                       {"db_path": db, "consolidator": "llm", "llm.service": "llm/complete",
                        "every_k_episodes": 100, "llm.timeout_s": 60.0})
    logs = lambda: cons.log() + "\n--- llm ---\n" + llm.log()  # noqa: E731
    try:
        with ros_client("llm_consolidation_test") as node:
            client = SpinSafeActionClient(node, Consolidate, "consolidate")
            assert client.wait_for_server(timeout_sec=60), logs()
            wait_for(lambda: "llm/complete" in str(node.get_service_names_and_types()), 30,
                     "the llm node's service", logs)
            fut = client.send_goal_async(Consolidate.Goal(reason="request", dry_run=True,
                                                          max_steps=3))
            wait_for(fut.done, 30, "goal response", logs)
            handle = fut.result()
            assert handle.accepted
            res = handle.get_result_async()
            wait_for(res.done, 150, "the consolidation result", logs)
            assert not res.result().result.committed  # a dry run writes nothing
            wait_for(lambda: "shared LLM release: model released" in cons.log(), 30,
                     "the consolidation node releasing the shared model", logs)
            assert "for a 'consolidate' request" in llm.log(), logs()
            assert "model released (llm/release)" in llm.log(), logs()
        assert _snapshot(db) == before
    finally:
        codes = cons.stop(), llm.stop()
    assert codes == (0, 0), logs()
