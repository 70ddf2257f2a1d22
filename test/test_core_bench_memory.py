"""Smoke test of `glove-ros bench memory`: runs at a tiny size and writes its JSON shape."""

from __future__ import annotations

import json

from glove_ros.cli import main as cli


def test_memory_benchmark_smoke(tmp_path, capsys):
    code = cli.main(["bench", "memory", "--sizes", "200", "--samples", "30", "--rounds", "1",
                     "--history-per-key", "20", "--synchronous", "NORMAL",
                     "--workdir", str(tmp_path), "--out", str(tmp_path)])
    assert code == 0
    doc = json.loads((tmp_path / "memory.json").read_text())
    row = doc["results"][0]
    assert row["size"] == 200
    mode = row["modes"]["NORMAL"]
    for key in ("observe_us", "bare_insert_select_us", "query_us", "bare_select_us"):
        assert mode[key]["p50"] > 0 and mode[key]["p99"] >= mode[key]["p50"]
    assert mode["observe_ratio"]["p50"] > 0
    assert "ratio" in capsys.readouterr().out.lower()
