# The two commands of the README. Both set everything up first (scripts/setup.sh is
# idempotent: the first run installs and compiles, later runs take seconds).
SHELL := /bin/bash
PYTEST_ARGS ?=

.PHONY: setup demo test lint clean

setup:
	@bash scripts/setup.sh

demo: setup
	@source env.sh && glove-ros demo

test: setup
	@source env.sh && ruff check glove_ros test scripts launch && python -m pytest -ra $(PYTEST_ARGS)

lint: setup
	@source env.sh && ruff check glove_ros test scripts launch

clean:
	rm -rf build install log
