"""The shared-LLM core (glove_ros/core/llm/shared.py): n_ctx sizing, the request codec, the
llm node's decisions (lazy load, refusals, release), without ROS or a model."""

from __future__ import annotations

import json

import pytest

from glove_ros.core.llm.runtime import LlmConfig, LlmLoadError, LlmResult, ScriptedLlm
from glove_ros.core.llm.shared import (
    SharedModel,
    check_fits,
    context_size,
    decode_request,
    encode_request,
    result_fields,
    result_from_fields,
    rss_mb,
)

SCHEMA = {"type": "object", "properties": {"waypoint": {"type": "string", "enum": ["a", "b"]}},
          "required": ["waypoint"], "additionalProperties": False}
MSGS = [{"role": "system", "content": "choose"}, {"role": "user", "content": "a or b?"}]


# -- n_ctx sizing -------------------------------------------------------------------------

@pytest.mark.parametrize("prompt, reply, expected", [
    (1920, 256, 2304),   # the jetrover profile: 1920 + 256 + 64 = 2240 -> 2304
    (400, 40, 512),      # a planner-only robot: the floor
    (0, 0, 512),
    (448, 0, 512),       # 448 + 64 = 512 exactly: no rounding up
    (449, 0, 768),
    (4000, 96, 4352),
])
def test_context_is_prompt_plus_reply_plus_margin_rounded_up_to_256(prompt, reply, expected):
    n = context_size(prompt, reply)
    assert n == expected
    assert n % 256 == 0 and n >= prompt + reply + 64
    assert check_fits(prompt, reply, n) is None


def test_context_size_options_and_bad_input():
    assert context_size(100, 28, margin=0, step=128, floor=0) == 128
    for bad in ((-1, 10), (10, -1), (1.5, 10), (True, 10)):
        with pytest.raises(ValueError, match="must be an int >= 0"):
            context_size(*bad)
    with pytest.raises(ValueError, match="step"):
        context_size(10, 10, step=0)


def test_a_prompt_that_does_not_fit_is_refused_with_the_numbers():
    err = check_fits(2100, 256, 2304)
    assert err is not None and "2100" in err and "256" in err and "n_ctx 2304" in err
    assert check_fits(1984, 256, 2304) is None  # 1984 + 256 + 64 = 2304


# -- request codec ------------------------------------------------------------------------

def test_request_round_trip_and_clear_errors_for_bad_json():
    m, s = encode_request(MSGS, SCHEMA)
    assert decode_request(m, s) == (MSGS, SCHEMA)
    cases = [
        ("not json", s, "messages_json is not JSON"),
        (m, "{", "schema_json is not JSON"),
        ('{"role": "user"}', s, "messages_json must be a JSON list"),
        ('[{"role": "robot", "content": "x"}]', s, r"messages_json: messages\[0\].role"),
        ("[]", s, "messages_json: messages must be a non-empty list"),
        (m, "[1]", "schema_json must be a JSON object"),
        (m, '{"type": "object", "patternProperties": {}}', "schema_json: .*unsupported"),
    ]
    for mj, sj, match in cases:
        with pytest.raises(ValueError, match=match):
            decode_request(mj, sj)
    with pytest.raises(ValueError):  # the caller's own bug raises on its side too
        encode_request([{"role": "user"}], SCHEMA)


def test_result_fields_round_trip_and_unchecked_data_never_reaches_the_caller():
    res = LlmResult({"waypoint": "a"}, '{"waypoint": "a"}', 6, None, 30, 1.5, "stop", 12,
                    0.5, 0.9)
    f = result_fields(res, load_s=2.0, n_ctx=2304)
    assert f["ok"] and json.loads(f["value_json"]) == {"waypoint": "a"} and f["n_ctx"] == 2304
    back = result_from_fields(f, SCHEMA)
    assert back.ok and back.data == {"waypoint": "a"} and back.tokens == 6
    assert back.elapsed_s == pytest.approx(3.5)  # the caller waited for the load too
    bad = dict(f, value_json='{"waypoint": "c"}')  # ok, but not valid against the schema
    r = result_from_fields(bad, SCHEMA)
    assert not r.ok and r.data is None and "schema violation" in r.error
    r = result_from_fields(dict(f, value_json="{"), SCHEMA)
    assert not r.ok and "invalid JSON" in r.error
    r = result_from_fields({"ok": False, "error": ""})
    assert not r.ok and "without a reason" in r.error
    failed = result_fields(LlmResult(None, "{", 3, "token bound reached", finish_reason="length"))
    assert not failed["ok"] and failed["value_json"] == "" and failed["error"]


# -- the llm node's core ------------------------------------------------------------------

class FakeBackend:
    """LlamaBackend's shape over a ScriptedLlm: load / close / loaded / count_tokens."""

    made = 0

    def __init__(self, config: LlmConfig, replies=None) -> None:
        FakeBackend.made += 1
        self.config = config
        self.model_path = "/models/fake.gguf"
        self.script = ScriptedLlm(default={"waypoint": "a"})
        self.loaded = False
        self.load_calls = 0
        self.timeouts: list[float] = []

    def load(self):
        self.load_calls += 1
        self.loaded = True
        return self

    def close(self) -> None:
        self.loaded = False

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def complete_json(self, messages, schema, max_tokens=None, *, timeout_s=None):
        assert self.loaded, "generation before load"
        self.timeouts.append(timeout_s)
        return self.script.complete_json(messages, schema, max_tokens)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _model(n_ctx=512, limit=64, factory=FakeBackend, clock=None):
    return SharedModel(LlmConfig(n_ctx=n_ctx, max_tokens=40, timeout_s=20.0), limit, factory,
                       clock=clock)


def test_model_loads_on_the_first_request_and_again_after_a_release():
    m = _model()
    assert not m.loaded and m.model_error is None
    req = encode_request(MSGS, SCHEMA)
    out = m.serve(*req, 0, 0.0, "plan")
    assert out["ok"] and json.loads(out["value_json"]) == {"waypoint": "a"}
    assert m.loaded and m.loads == 1 and out["n_ctx"] == 512
    assert m._backend.timeouts == [20.0]  # the node's timeout when the request gives none
    out = m.serve(*req, 16, 5.0, "parse")
    assert out["ok"] and out["load_s"] == 0.0 and m.loads == 1
    assert m._backend.timeouts[-1] == 5.0
    assert m.release() and not m.loaded and m.releases == 1
    assert not m.release()  # nothing to release twice
    out = m.serve(*req, 0, 0.0, "consolidate")
    assert out["ok"] and m.loaded and m.loads == 2
    assert m.requests == {"plan": 1, "parse": 1, "consolidate": 1}


def test_bad_requests_are_refused_before_anything_loads():
    m = _model()
    m_json, s_json = encode_request(MSGS, SCHEMA)
    for args, match in [(("nope", s_json, 0, 0.0), "bad request: messages_json is not JSON"),
                        ((m_json, "{}x", 0, 0.0), "bad request: schema_json is not JSON"),
                        ((m_json, s_json, 65, 0.0), "max_tokens must be in 1..64"),
                        ((m_json, s_json, -3, 0.0), "max_tokens must be in 1..64"),
                        ((m_json, s_json, 0, -1.0), "timeout_s must be > 0")]:
        out = m.serve(*args, "plan")
        assert not out["ok"] and out["finish_reason"] == "refused"
        assert out["error"].startswith("bad request") and match.split(":")[-1].strip() in \
            out["error"], out["error"]
    assert not m.loaded and m.failures == 5


def test_a_prompt_longer_than_the_context_is_refused_not_truncated():
    m = _model(n_ctx=128, limit=40)
    long_msgs = [{"role": "user", "content": "word " * 100}]
    out = m.serve(*encode_request(long_msgs, SCHEMA), 40, 0.0, "consolidate")
    assert not out["ok"] and "n_ctx 128" in out["error"] and out["prompt_tokens"] == 104
    assert m._backend.script.calls == []  # the model was never asked


def test_a_missing_model_is_reported_per_request_and_found_once_installed():
    installed = {"yes": False}

    def factory(cfg):
        if not installed["yes"]:
            raise LlmLoadError("model qwen2.5-coder-1.5b is not installed: run setup")
        return FakeBackend(cfg)

    m = _model(factory=factory)
    assert "not installed" in m.model_error
    out = m.serve(*encode_request(MSGS, SCHEMA), 0, 0.0, "plan")
    assert not out["ok"] and out["error"].startswith("no model: ") and "run setup" in out["error"]
    installed["yes"] = True
    out = m.serve(*encode_request(MSGS, SCHEMA), 0, 0.0, "plan")
    assert out["ok"] and m.model_error is None


def test_generation_failures_come_back_as_results_never_exceptions():
    class Broken(FakeBackend):
        def complete_json(self, *a, **k):
            raise RuntimeError("CUDA out of memory")

    class Garbage(FakeBackend):
        def __init__(self, cfg):
            super().__init__(cfg)
            self.script = ScriptedLlm(["not json {"])

    out = _model(factory=Broken).serve(*encode_request(MSGS, SCHEMA), 0, 0.0, "plan")
    assert not out["ok"] and "CUDA out of memory" in out["error"]
    m = _model(factory=Garbage)
    out = m.serve(*encode_request(MSGS, SCHEMA), 0, 0.0, "plan")
    assert not out["ok"] and "invalid JSON" in out["error"] and out["raw_text"] == "not json {"
    assert m.failures == 1


def test_idle_release_only_after_the_idle_time_and_never_while_busy():
    clock = Clock()
    m = _model(clock=clock)
    assert not m.idle_expired(10.0)  # nothing loaded
    m.serve(*encode_request(MSGS, SCHEMA), 0, 0.0, "plan")
    clock.t += 9.0
    assert not m.idle_expired(10.0)
    clock.t += 1.0
    assert m.idle_expired(10.0) and not m.idle_expired(0.0)  # 0 = never
    m.busy = True
    assert not m.idle_expired(10.0)


def test_config_checks():
    with pytest.raises(ValueError, match="max_tokens must be an int in"):
        _model(n_ctx=512, limit=512)
    with pytest.raises(ValueError, match="n_ctx"):
        SharedModel(LlmConfig(n_ctx=10), 5, FakeBackend)


def test_rss_of_this_process_and_clear_errors(tmp_path):
    assert 5.0 < rss_mb() < 100_000
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "status").write_text("Name:\tx\nVmRSS:\t  204800 kB\n")
    assert rss_mb(42, tmp_path) == pytest.approx(200.0)
    (tmp_path / "43").mkdir()
    (tmp_path / "43" / "status").write_text("Name:\tx\nState:\tZ (zombie)\n")
    with pytest.raises(ValueError, match="no VmRSS"):
        rss_mb(43, tmp_path)
    with pytest.raises(OSError):
        rss_mb(44, tmp_path)
