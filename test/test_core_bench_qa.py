"""`glove-ros bench qa` in small: drift worlds with ground truth, every arm keyed by name,
a scripted LLM in place of the model (the real one runs in the benchmark itself)."""

from __future__ import annotations

import json

import pytest

from glove_ros.benchmarks import qa as bench
from glove_ros.benchmarks._qa_worlds import NOUNS, PLACES, build_world, make_cases
from glove_ros.cli.main import main as cli_main
from glove_ros.core.llm.runtime import ScriptedLlm
from glove_ros.core.plan import qa


def _first_choice(messages, schema):
    """A model that always takes the first allowed value and cites the first fact."""
    p = schema["properties"]
    v = p["v"]
    if v.get("type") == "array":
        value = v["items"].get("enum", [])[:1]
    else:
        value = v["enum"][0]
    return {"v": value, "c": p["c"]["items"]["enum"][:1]}


def test_worlds_use_fresh_names_and_ask_answerable_questions():
    qw = build_world(1000, 0)
    qw.cases = make_cases(qw, 15)
    assert set(qw.current) <= set(PLACES)
    assert all(lbl.split()[1] in NOUNS for lbl in qw.labels.values())
    prompt = json.dumps([qa.SYSTEM_PROMPT, qa.EXAMPLES]).lower()
    for name in [*qw.current, *(lbl.split()[1] for lbl in qw.labels.values())]:
        assert name not in prompt, name
    assert 8 <= len(qw.cases) <= 15
    assert {c.qtype for c in qw.cases} <= set(bench.QTYPES)
    assert any(c.qtype == "staleness" for c in qw.cases)


def test_quick_run_keys_every_arm_and_separates_glove_from_static():
    llm = ScriptedLlm(default=_first_choice)
    doc = bench.run(llm, seeds=[1000], dev_seeds=[0], worlds=2, questions=10)
    rule = doc["recency_rule"]
    assert rule in bench.RECENCY_RULES
    assert {"llm+glove", "template+glove", "llm+static", f"llm+{rule}"} <= set(doc["arms"])
    for arm in doc["arms"].values():
        assert set(arm["accuracy"]) == {*bench.QTYPES, "all"}
        assert arm["accuracy"]["staleness"]["n"] > 0
        lo, hi = arm["accuracy"]["all"]["ci95"]
        assert 0.0 <= lo <= arm["accuracy"]["all"]["rate"] <= hi <= 1.0
    g, s = doc["arms"]["template+glove"], doc["arms"]["template+static"]
    # verified memory knows what drift contradicted; never-verified memory does not
    assert g["accuracy"]["staleness"]["rate"] >= 0.8
    assert s["accuracy"]["staleness"]["rate"] <= 0.2
    assert g["citation_validity"] == 1.0
    llm_arm = doc["arms"]["llm+glove"]
    assert llm_arm["answers_by_llm"] > 0 and llm_arm["citation_validity"] == 1.0
    assert doc["targets"]["citations_real"]["met"]
    assert doc["dev_seeds"] == [0] and doc["report_seeds"] == [1000]
    assert doc["prompt_sha256"] == qa.PROMPT_SHA256
    # llama.cpp's own counters are reported per answer (zeros for a scripted model)
    assert {"prompt_eval_tokens", "prompt_eval_s", "gen_s"} <= set(doc["rows"][0])
    assert "ms_per_output_token" in llm_arm and "prompt_eval_tokens_per_answer" in llm_arm


def test_report_seeds_are_fresh_and_disjoint_from_development():
    # 1000-1002, then 1003-1005, were run as report seeds once, then the answerer changed:
    # development now
    assert {0, 1, 2, 1000, 1001, 1002, 1003, 1004, 1005} <= set(bench.DEV_SEEDS)
    assert not set(bench.REPORT_SEEDS) & set(bench.DEV_SEEDS)
    assert bench.REPORT_SEEDS == (1006, 1007, 1008)


def test_overlapping_seeds_are_refused():
    with pytest.raises(ValueError, match="overlap"):
        bench.run(None, seeds=[1, 2], dev_seeds=[2])


def test_cli_quick_template_run_writes_json_and_png(tmp_path, capsys):
    # a development seed: the report seeds run once, on frozen code, in the benchmark only
    rc = cli_main(["bench", "qa", "--quick", "--no-llm", "--no-progress", "--seeds", "1000",
                   "--dev-seeds", "0", "--out", str(tmp_path)])
    assert rc == 0
    doc = json.loads((tmp_path / "qa.json").read_text())
    assert (tmp_path / "qa.png").stat().st_size > 0
    assert doc["questions"] == 8 and set(doc["arms"]) == {
        "template+glove", "template+static", f"template+{doc['recency_rule']}"}
    assert "template+glove" in capsys.readouterr().out
