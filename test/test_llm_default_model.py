"""The shipped default model on the real llama.cpp runtime (few calls: CI has 2 cores).

Skipped when the model is not installed, except in CI, where scripts/setup.sh installs it
and a missing model is a failure.
"""

from __future__ import annotations

import random

import pytest
from conftest import require_default_model

from glove_ros.benchmarks import llm as bench
from glove_ros.core.llm.models import DEFAULT_MODEL
from glove_ros.core.llm.prompts import decision_messages, decision_schema
from glove_ros.core.llm.runtime import LlamaBackend, LlmConfig
from glove_ros.core.plan.tasks import request_from_llm, request_messages, request_schema

# ~30 s on 2 quiet cores; a shared, loaded machine needs far longer for the first prompt
pytestmark = [pytest.mark.llm, pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def backend():
    require_default_model()
    b = LlamaBackend(LlmConfig(model_path=DEFAULT_MODEL, n_ctx=4096, n_threads=2,
                               max_tokens=64, timeout_s=600.0)).load()
    yield b
    b.close()


def test_default_model_decides_with_reused_prefix_and_parses_a_request(backend):
    rng = random.Random(7)
    cases = [bench.waypoint_case(rng, "verified_far"), bench.waypoint_case(rng, "suppressed")]
    evaluated = []
    for c in cases:
        res = backend.complete_json(decision_messages(c.colour, c.current, c.options, c.notes),
                                    decision_schema(c.colour, c.options, c.notes),
                                    max_tokens=40)
        assert res.ok, res.error
        assert res.data["waypoint"] in {o.waypoint for o in c.options}
        evaluated.append(res.prompt_eval_tokens)
        assert res.prompt_tokens > 0 and res.tokens > 0
    # the second decision re-evaluates only its own part, not the rules and examples
    assert 0 < evaluated[1] < evaluated[0] / 2, evaluated
    places = ("hall", "kitchen", "lab")
    res = backend.complete_json(
        request_messages("take me to where you saw the red block most recently",
                         ("red", "blue"), places),
        request_schema(("red", "blue"), places), max_tokens=64)
    assert res.ok, res.error
    req = request_from_llm(res.data, "x")
    assert req is not None and req.intent in ("go_to_last_seen", "find", "go_to")
