"""Every example in README.md and docs/*.md runs as written, from a folder that is not the repository.

Each page's fenced ```python, ```bash and ```sh blocks run in order, in one new interpreter per page whose
current folder is a temporary one (the package is imported as installed: from PYTHONPATH, never from the
current folder). The interpreters, the page's and each `echo-tools` command's, are forked from one that has
imported the frameworks already (`tests/_forkserver.py`): the same process as a fresh `python`, without importing
CrewAI again for every page and command (about 4 s of CPU each). Python blocks share one namespace, as a
reader pasting them into one session would. A Python block whose first line is `# name.py` is the file a
reader saves: it is written into the folder, not run. Any other block with `<!-- file: NAME -->` on the line
above its fence is saved as NAME the same way (a workflow file the page's commands read). A bash/sh block runs
with `bash -e`, `echo-tools` being this checkout's command. A console block is a transcript: its `$ ` lines
run one by one and each must exit 0, unless the transcript shows it failing (its next line starts with
`echo-tools: error:`), when it must fail. An untagged fence may not hold commands (tag it `bash`, or `text`
for output), so no example escapes the run by its tag.

A block that needs something outside the machine (EchoAI's repository, a server started by hand, the
network) is excluded by an HTML comment on the line just above its fence, saying why:

    <!-- not run: needs EchoAI's repository -->

The test fails on an exclusion without a reason. Pages whose examples another test already runs are
listed in COVERED_ELSEWHERE, and that test's extraction is checked to see the same blocks.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import _forkserver
from tests.echo_tools._storage_support import REPO_ROOT, child_env

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([a-z]*)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
RUN_LANGS = ("python", "bash", "sh", "console")
FILE_MARK = re.compile(r"<!--\s*file:\s*(\S+?)\s*-->\s*\Z")
EXCLUDED = re.compile(r"<!--\s*not run(?::\s*(.*?))?\s*-->\s*\Z", re.S)
SAVED_FILE = re.compile(r"#\s*([A-Za-z_][A-Za-z0-9_]*\.py)\s*$")


def _dropin_blocks() -> list[str]:
    from tests.workflow_bridge.test_dropin_doc import _python_blocks

    return _python_blocks()


# page -> (the test that runs its examples, its own extraction of them)
COVERED_ELSEWHERE = {
    "docs/echoai.md": ("tests/workflow_bridge/test_dropin_doc.py", _dropin_blocks),
}


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    excluded: str | None  # the reason, "" when the comment gives none; None when the block runs
    file_mark: str | None = None

    @property
    def saved_as(self) -> str | None:
        if self.file_mark:
            return self.file_mark
        first = self.code.split("\n", 1)[0]
        match = SAVED_FILE.fullmatch(first.strip()) if self.lang == "python" else None
        return match.group(1) if match else None


def blocks_of(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n")
        last = before.rsplit("\n", 1)[-1]
        excluded = EXCLUDED.search(last)
        file_mark = FILE_MARK.search(last)
        if match.group(1) not in RUN_LANGS and file_mark is None:
            continue
        found.append(
            Block(
                page=str(page.relative_to(REPO_ROOT)),
                line=text.count("\n", 0, match.start()) + 1,
                lang=match.group(1),
                code=match.group(2),
                excluded=None if excluded is None else (excluded.group(1) or "").strip(),
                file_mark=file_mark.group(1) if file_mark else None,
            )
        )
    return found


def console_commands(code: str) -> list[tuple[str, bool]]:
    """The `$ ` commands of a console transcript, each with whether the transcript shows it failing."""
    lines = code.splitlines()
    found: list[tuple[str, bool]] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        command = lines[i][2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command + "\n" + lines[i]
        following = lines[i + 1] if i + 1 < len(lines) else ""
        found.append((command, following.startswith("echo-tools: error:")))
        i += 1
    return found


def _run_page(blocks: list[Block], folder: Path, python: list[str]) -> subprocess.CompletedProcess[str]:
    """One interpreter for the page: each block exec'd (or handed to bash) in order, in `folder`.

    `python` is the command that starts an interpreter (the forked Python of `_forkserver`); the
    page's `echo-tools` is that interpreter running `-m echo_tools.cli`."""
    plan = [
        {
            "where": f"{b.page}:{b.line}",
            "lang": b.lang,
            "code": b.code,
            "saved_as": b.saved_as,
            "commands": console_commands(b.code) if b.lang == "console" else [],
        }
        for b in blocks
        if b.excluded is None
    ]
    shell = f'echo-tools() {{ {shlex.join(python)} -m echo_tools.cli "$@"; }}\n'
    driver = (
        "import json, subprocess, sys\n"
        f"plan = json.loads({json.dumps(json.dumps(plan))})\n"
        f"shell = {shell!r}\n"
        "ns = {'__name__': '__main__'}\n"
        "for block in plan:\n"
        "    print('=== ' + block['where'], flush=True)\n"
        "    if block['saved_as']:\n"
        "        with open(block['saved_as'], 'w', encoding='utf-8') as f:\n"
        "            f.write(block['code'])\n"
        "    elif block['lang'] == 'python':\n"
        "        exec(compile(block['code'], block['where'], 'exec'), ns)\n"
        "    elif block['lang'] == 'console':\n"
        "        for command, fails in block['commands']:\n"
        "            done = subprocess.run(['bash', '-c', shell + command], capture_output=True, text=True)\n"
        "            if bool(done.returncode) != fails:\n"
        "                sys.exit('%s: %r exited %d%s\\n%s' % (block['where'], command, done.returncode,\n"
        "                         ' (the transcript shows it failing)' if fails else '', done.stderr))\n"
        "    else:\n"
        "        done = subprocess.run(['bash', '-e', '-c', shell + block['code']])\n"
        "        if done.returncode:\n"
        "            sys.exit(block['where'] + ': exit status %d' % done.returncode)\n"
        "    sys.stdout.flush()\n"
        "print('=== all blocks ran', flush=True)\n"
    )
    (folder / "_doc_driver.py").write_text(driver, encoding="utf-8")
    return subprocess.run(
        [*python, "_doc_driver.py"],
        cwd=folder,
        env=_page_env(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _page_env() -> dict[str, str]:
    env = child_env()
    env["PYTHONPATH"] = str(REPO_ROOT)  # the package as installed; the folder holds only what the page saves
    return env


# what the pages import between them: imported once by the forked Python, not by each page and command
PRELOADED = [
    "echo_tools.cli.main",
    "workflow_bridge.commands",
    "workflow_bridge.runner",
    "langgraph.graph",
    "fastapi",
]


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """The command of an interpreter forked from one that has imported the frameworks already."""
    where = tmp_path_factory.mktemp("forked_python")
    socket_path = str(where / "python.sock")
    with (where / "server.log").open("w") as err:
        server = _forkserver.start(socket_path, PRELOADED, env=_page_env(), stderr=err)
    try:
        yield _forkserver.command(socket_path)
    finally:
        _forkserver.stop(server)


def _page_id(page: Path) -> str:
    return str(page.relative_to(REPO_ROOT))


RUN_HERE = [
    p for p in PAGES if _page_id(p) not in COVERED_ELSEWHERE and any(b.excluded is None for b in blocks_of(p))
]


def test_every_excluded_block_says_why() -> None:
    missing = [f"{b.page}:{b.line}" for p in PAGES for b in blocks_of(p) if b.excluded == ""]
    assert missing == [], f"'<!-- not run: REASON -->' without a reason at {missing}"
    excluded = [b for p in PAGES for b in blocks_of(p) if b.excluded]
    assert all(len(b.excluded or "") >= 10 for b in excluded), [(b.page, b.line) for b in excluded]


COMMAND_LINE = re.compile(r"^\s*(\$ )?(echo-tools|curl|pip|python|make|npx|git)\b", re.M)


def test_no_untagged_fence_holds_commands() -> None:
    untagged = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match.group(1) == "" and COMMAND_LINE.search(match.group(2)):
                untagged.append(f"{_page_id(page)}:{text.count(chr(10), 0, match.start()) + 1}")
    assert untagged == [], f"commands in untagged fences (tag them bash, or text for output): {untagged}"


def test_console_transcripts_are_read_as_commands() -> None:
    transcript = (
        "$ echo-tools run a.json \\\n  --run-id r\nout\n$ echo-tools resume r\necho-tools: error: no\n"
    )
    assert console_commands(transcript) == [
        ("echo-tools run a.json \\\n  --run-id r", False),
        ("echo-tools resume r", True),
    ]


def test_the_extractor_sees_the_pages_blocks() -> None:
    readme = blocks_of(REPO_ROOT / "README.md")
    assert [(b.lang, b.saved_as) for b in readme] == [
        ("python", None),
        ("python", "my_tools.py"),
        ("python", None),
        ("bash", None),
        ("bash", None),
    ]
    runs = blocks_of(REPO_ROOT / "docs" / "runs.md")
    assert runs[0].lang == "json" and runs[0].saved_as == "gated.json"  # `<!-- file: gated.json -->`
    mcp = blocks_of(REPO_ROOT / "docs" / "mcp.md")
    assert mcp and all(b.excluded for b in mcp)  # every one starts a server of the clone's tests
    assert sum(len(blocks_of(p)) for p in PAGES) > 40


@pytest.mark.parametrize("page", sorted(COVERED_ELSEWHERE))
def test_pages_run_elsewhere_are_run_whole_there(page: str) -> None:
    """The other test runs the same Python blocks this extractor finds, none excluded."""
    _, extraction = COVERED_ELSEWHERE[page]
    ours = [b for b in blocks_of(REPO_ROOT / page) if b.lang == "python" and b.excluded is None]
    assert [b.code for b in ours] == extraction()
    blocks = blocks_of(REPO_ROOT / page)
    assert [b for b in blocks if b.lang == "python" and b.excluded is not None] == []  # all run there
    assert [b for b in blocks if b.lang != "python" and b.excluded is None] == []  # the rest say why not


def test_the_forked_python_runs_a_command_as_python_would(tmp_path: Path, python: list[str]) -> None:
    """Folder, environment, arguments, streams and exit status are the requester's, with and without -m,
    as a fresh `python` has them (the requester without a server)."""
    (tmp_path / "exits.py").write_text(
        "import os, sys\n"
        "print(os.getcwd(), os.environ['PAGE_VAR'], sys.argv[1:], sys.path[0])\n"
        "sys.exit(3)\n",
        encoding="utf-8",
    )
    env = {**_page_env(), "PAGE_VAR": "seen"}
    without_server = [*python[:-1], str(tmp_path / "no.sock")]  # runs `python ARGS` in its place
    for requester in (python, without_server):
        done = subprocess.run([*requester, "exits.py", "a b"], cwd=tmp_path, env=env, capture_output=True)
        assert (done.returncode, done.stdout) == (3, f"{tmp_path} seen ['a b'] {tmp_path}\n".encode())
    command = [*python, "-m", "echo_tools.cli", "resume", "run_unknown", "--approve"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr == "echo-tools: error: no recorded run has run_id 'run_unknown'\n"


def test_the_forked_python_stands_for_its_child(tmp_path: Path, python: list[str]) -> None:
    """The requester forwards a signal to the child and exits as the child did (128 + the signal)."""
    (tmp_path / "waits.py").write_text("import os, sys\nprint(os.getpid(), flush=True)\nsys.stdin.read()\n")
    streams = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE}
    waiting = subprocess.Popen([*python, "waits.py"], cwd=tmp_path, env=_page_env(), text=True, **streams)
    assert waiting.stdout is not None and waiting.stdin is not None
    child = int(waiting.stdout.readline())
    assert child != waiting.pid
    waiting.send_signal(signal.SIGTERM)
    assert waiting.wait(30) == 128 + signal.SIGTERM
    assert not Path(f"/proc/{child}").exists()  # ended and reaped
    waiting.stdin.close()
    waiting.stdout.close()


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN_HERE, ids=_page_id)
def test_the_pages_examples_run_as_written_from_another_folder(
    page: Path, tmp_path: Path, python: list[str]
) -> None:
    blocks = blocks_of(page)
    folder = tmp_path / "reader"
    folder.mkdir()
    done = _run_page(blocks, folder, python)
    assert done.returncode == 0, done.stdout[-2000:] + "\n" + done.stderr[-4000:]
    assert done.stdout.rstrip().endswith("=== all blocks ran")
    ran = [line[4:] for line in done.stdout.splitlines() if line.startswith("=== ")]
    assert ran[:-1] == [f"{b.page}:{b.line}" for b in blocks if b.excluded is None]
