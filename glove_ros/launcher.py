"""``glove-ros launch``: start a deployment's nodes as processes (no ``ros2 launch`` needed)."""

from __future__ import annotations

import argparse
import subprocess
from typing import Any

from glove_ros import graph


def add_parser(sub: Any) -> None:
    """Add the ``launch`` subcommand to the ``glove-ros`` subparsers ``sub``."""
    p = sub.add_parser(
        "launch", help="start a deployment's nodes as processes (no ros2 launch needed)",
        description="Start every node of a deployment (glove_ros/graph.py) as its own process "
        "with the deployment's parameter file, like 'ros2 launch glove_ros NAME.launch.py'. "
        "Ctrl-C stops them all. Deployments: " + "; ".join(
            f"{d.name}: {d.description}" for d in graph.DEPLOYMENTS.values()),
    )
    p.add_argument("deployment", choices=sorted(graph.DEPLOYMENTS))
    p.add_argument("--params-file", help="parameter file (default: config/<deployment>.yaml)")
    p.add_argument("--namespace", default="", help="robot namespace, e.g. /jetrover_1")
    p.set_defaults(func=launch)


def launch(args: argparse.Namespace) -> int:
    """Start the deployment's nodes; wait until one exits or Ctrl-C; stop the rest."""
    import signal
    import time

    from glove_ros.paths import resolve_config

    dep = graph.deployment(args.deployment)
    params = args.params_file or str(resolve_config(dep.config))
    procs = []
    for spec in dep.nodes:
        cmd = graph.process_command(spec, params, namespace=args.namespace)
        print(f"[launch] {spec.name}: {' '.join(cmd[2:])}")
        procs.append((spec.name, subprocess.Popen(cmd)))
    code = 0
    try:
        while all(p.poll() is None for _, p in procs):
            time.sleep(0.2)
        for name, p in procs:
            if p.poll() is not None:
                print(f"[launch] {name} exited with {p.returncode}; stopping the others")
                code = p.returncode or 1
    except KeyboardInterrupt:
        pass
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for _, p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    return code
