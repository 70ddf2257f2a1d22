"""Benchmarks run by ``glove-ros bench NAME``: each module has ``add_arguments`` and ``main``."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def write_results(doc: Mapping[str, Any], out_dir: str | Path, stem: str,
                  write_plot: Callable[[Mapping[str, Any], Path], None],
                  format_table: Callable[[Mapping[str, Any]], str], as_json: bool) -> int:
    """Write ``<out>/<stem>.json`` and ``.png``; print the JSON or the table. Returns 0."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jpath = out / f"{stem}.json"
    jpath.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    ppath = out / f"{stem}.png"
    write_plot(doc, ppath)
    if as_json:
        print(json.dumps(doc, indent=1))
    else:
        print(format_table(doc))
        print(f"wrote {jpath} and {ppath}")
    return 0
