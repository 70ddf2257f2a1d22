"""docs/parameters.md and docs/schemas.md are what the code declares (regenerate with
``python -m glove_ros.cli.docgen`` after changing a node's PARAMS or a loader's schema)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from glove_ros.cli import docgen  # noqa: E402

DOCS = Path(__file__).resolve().parent.parent / "docs"
HINT = "out of date: run 'python -m glove_ros.cli.docgen' and commit docs/"


def test_parameter_reference_matches_declarations():
    text = docgen.parameters_markdown()
    assert (DOCS / "parameters.md").read_text() == text, f"docs/parameters.md {HINT}"
    from glove_ros.nodes import memory_node

    for p in memory_node.PARAMS:  # every declared parameter is listed
        assert f"| `{p.name}` |" in text


def test_schema_reference_matches_loaders():
    text = docgen.schemas_markdown()
    assert (DOCS / "schemas.md").read_text() == text, f"docs/schemas.md {HINT}"
    assert "swap_blocks" in text and "open_edge" in text and "budget" in text
