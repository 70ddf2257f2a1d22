# The two commands of the README. Both set everything up first (scripts/setup.sh is
# idempotent: the first run installs and compiles, later runs take seconds).
SHELL := /bin/bash
PYTEST_ARGS ?=

.PHONY: setup demo test lint clean

setup:
	@bash scripts/setup.sh

demo: setup
	@source env.sh && glove-ros demo

# The whole suite against ROS 2 Kilted, then the node and system tests (everything that
# talks DDS or builds on the generated interfaces) again against ROS 2 Jazzy.
JAZZY_TESTS ?= test/test_node_*.py test/test_system_*.py

test: setup
	@source env.sh && ruff check glove_ros test scripts launch && python -m pytest -ra $(PYTEST_ARGS)
	@if [[ "$${GLOVE_NO_JAZZY:-0}" == 1 ]]; then echo "[test] Jazzy run skipped (GLOVE_NO_JAZZY=1)"; \
	else echo "[test] ROS 2 Jazzy: $(JAZZY_TESTS)"; \
	  GLOVE_ROS_DISTRO=jazzy source env.sh && python -m pytest -ra $(PYTEST_ARGS) $(JAZZY_TESTS); fi

lint: setup
	@source env.sh && ruff check glove_ros test scripts launch

clean:
	rm -rf build install install-jazzy log
