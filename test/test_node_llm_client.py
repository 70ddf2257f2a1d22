"""ServiceLlm (glove_ros/nodes/llm_client.py) fails soft: an absent, silent or garbling llm
node gives a failed LlmResult in bounded time, never an exception, and the planner then
falls back to greedy exactly as on any LLM failure. In-process rclpy, a stand-in server."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rosproc import ros_client  # noqa: E402

from glove_ros.core.llm.runtime import LlmResult, ScriptedLlm  # noqa: E402
from glove_ros.core.llm.shared import result_fields  # noqa: E402

SCHEMA = {"type": "object", "properties": {"waypoint": {"type": "string", "enum": ["a", "b"]}},
          "required": ["waypoint"], "additionalProperties": False}
MSGS = [{"role": "user", "content": "a or b?"}]


def _stand_in(node, name, mode, seen):
    """An LlmComplete server whose behaviour is ``mode["now"]``."""
    from glove_ros.srv import LlmComplete

    script = ScriptedLlm(default={"waypoint": "b"})

    def serve(req, resp):
        seen.append(req)
        if mode["now"] == "slow":
            time.sleep(2.0)
        if mode["now"] == "garbage":
            resp.ok, resp.value_json = True, '{"waypoint": "zzz"}'
            return resp
        res = script.complete_json(json.loads(req.messages_json), json.loads(req.schema_json),
                                   req.max_tokens)
        for k, v in result_fields(res, n_ctx=512).items():
            setattr(resp, k, v)
        return resp

    from rclpy.callback_groups import ReentrantCallbackGroup

    return node.create_service(LlmComplete, name, serve, callback_group=ReentrantCallbackGroup())


def test_client_answers_and_fails_soft_in_bounded_time(tmp_path):
    from glove_ros.nodes.llm_client import ServiceLlm, release_service_of, shared_llm

    assert release_service_of("llm/complete") == "llm/release"
    assert release_service_of("/robot1/llm/complete") == "/robot1/llm/release"
    mode, seen = {"now": "ok"}, []
    with ros_client("llm_client_test") as node:
        _stand_in(node, "t/llm/complete", mode, seen)
        llm = ServiceLlm(node, "t/llm/complete", purpose="plan", max_tokens=40, timeout_s=0.5,
                         wait_s=0.5, discover_s=5.0)
        res = None
        for _ in range(5):  # the first answer can be lost while discovery settles
            res = llm.complete_json(MSGS, SCHEMA)
            if res.ok:
                break
        assert res.ok and res.data == {"waypoint": "b"}, res.error
        req = seen[-1]
        assert req.purpose == "plan" and req.max_tokens == 40 and req.timeout_s == 0.5
        assert json.loads(req.messages_json) == MSGS and json.loads(req.schema_json) == SCHEMA
        assert llm.with_purpose("parse").complete_json(MSGS, SCHEMA, 64).ok
        assert seen[-1].purpose == "parse" and seen[-1].max_tokens == 64

        mode["now"] = "garbage"  # ok=true with a value outside the schema: never trusted
        res = llm.complete_json(MSGS, SCHEMA)
        assert not res.ok and res.data is None and "reply unusable" in res.error

        mode["now"] = "slow"  # answers after 2 s; the client gives up after 0.5 + 0.5 s
        t0 = time.monotonic()
        res = llm.complete_json(MSGS, SCHEMA)
        took = time.monotonic() - t0
        assert not res.ok and "no answer from" in res.error and took < 1.8, (took, res.error)

        absent = ServiceLlm(node, "nobody/llm/complete", discover_s=0.3)
        t0 = time.monotonic()
        res = absent.complete_json(MSGS, SCHEMA)
        assert not res.ok and "not available" in res.error and time.monotonic() - t0 < 1.5
        ok, text = absent.release()
        assert not ok and "not available" in text
        with pytest.raises(ValueError):  # bad input is the caller's bug, as in-process
            absent.complete_json([{"role": "nobody", "content": "x"}], SCHEMA)

        again = shared_llm(node, llm, "t/llm/complete", purpose="reflect", max_tokens=256)
        assert again is llm and llm.purpose == "reflect" and llm.max_tokens == 256
        assert shared_llm(node, llm, "other/llm/complete") is not llm
        time.sleep(2.0)  # let the slow call's late answer arrive before shutdown


def test_planner_falls_back_to_greedy_when_the_llm_node_is_absent(tmp_path):
    from test_core_plan_agent import _ctx

    from glove_ros.core.plan.agent_policy import GreedyPlanner, LlmPlanner, LlmPlannerConfig
    from glove_ros.core.plan.tasks import understand
    from glove_ros.nodes.llm_client import ServiceLlm

    ctx = _ctx(tmp_path)
    with ros_client("llm_client_fallback") as node:
        llm = ServiceLlm(node, "absent/llm/complete", discover_s=0.2)
        planner = LlmPlanner(llm, LlmPlannerConfig(timeout_s=5.0))
        d = planner.choose(ctx)
        assert d.source == "fallback" and "not available" in d.fallback_reason
        assert d.goal == GreedyPlanner().choose(ctx).goal and planner.fallback_count == 1
        with pytest.raises(ValueError, match="not understood .*not available"):
            understand("wander about a bit", ("red",), ("hall", "lab"), llm)
        assert isinstance(llm.complete_json(MSGS, SCHEMA), LlmResult)
