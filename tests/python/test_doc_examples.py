"""Every ```python block of README.md and docs/*.md runs as written.

A doc's blocks run in order, in one namespace, as a reader would type them
into one interpreter: in a fresh process per doc, in an empty temporary
directory, with the package under test on PYTHONPATH. A failure names the
doc, the block's line and the error, with a traceback whose lines are the
doc's own.

HTML comments on the lines right before a block's fence say how it runs:

- ``<!-- not-run: REASON -->``: never run; reported as skipped with REASON.
- ``<!-- needs: torch2 -->`` (also ``lightning``, ``dcp``, ``mpi4py``,
  ``cuda``; several separated by commas): skipped, with the reason, where the
  interpreter lacks it.
- ``<!-- needs: torchrun -->``: run as one rank of a one-process torchrun
  (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set for the doc's process).
- ``<!-- example: NAME -->``: a script another suite writes out with
  tests/python/conftest.py's doc_example and runs with arguments; here it
  must compile and be used by some suite.

Run as a script (``python test_doc_examples.py SPEC OUT``), this file is the
runner of one doc's blocks in the doc's process.
"""

import glob
import importlib.util
import json
import linecache
import os
import re
import socket
import subprocess
import sys
import traceback
from typing import Any, Dict, List

FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[A-Za-z0-9_+-]*)[ \t]*$")
MARKER = re.compile(r"^[ \t]*<!--\s*(?P<key>not-run|needs|example)\s*:\s*(?P<value>.*?)\s*-->[ \t]*$")
DOC_TIMEOUT_S = 600


def extract_blocks(path, text):
    """The ```python blocks of one Markdown text: dicts with the fence's
    line (1-based), the first code line, the code (dedented by the fence's
    indentation) and the markers on the lines before the fence."""
    lines = text.split("\n")
    blocks: List[Dict[str, Any]] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group("lang"):
            i += 1
            continue
        indent, lang, start = m.group("indent"), m.group("lang"), i
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        if i == len(lines):
            raise ValueError(f"{path}:{start + 1}: a ```{lang} block that never closes")
        i += 1
        if lang != "python":
            continue
        markers: Dict[str, str] = {}
        j = start - 1
        while j >= 0:
            mm = MARKER.match(lines[j])
            if not mm:
                break
            markers.setdefault(mm.group("key"), mm.group("value"))
            j -= 1
        blocks.append({"line": start + 1, "code_line": start + 2, "code": "\n".join(body) + "\n",
                       "markers": markers})
    return blocks


# ---- The runner (in the doc's own process) ---------------------------------

def run_blocks(spec_path, out_path):
    """Runs the blocks of spec_path in order in one namespace and writes one
    result per block to out_path; after a failure the rest are not run."""
    with open(spec_path) as f:
        spec = json.load(f)
    namespace: Dict[str, Any] = {"__name__": "__main__"}
    results: List[Dict[str, Any]] = []
    failed_at = None
    for block in spec["blocks"]:
        if not block["run"]:
            results.append({"outcome": "skipped"})
            continue
        if failed_at is not None:
            results.append({"outcome": "not-run", "after": failed_at})
            continue
        # Padded so that the traceback's line numbers are the doc's, and
        # registered so that it quotes them.
        source = "\n" * (block["code_line"] - 1) + block["code"]
        linecache.cache[spec["doc"]] = (len(source), None, source.splitlines(True), spec["doc"])
        try:
            exec(compile(source, spec["doc"], "exec"), namespace)
            results.append({"outcome": "passed"})
        except BaseException as e:  # noqa: B902 (SystemExit and KeyboardInterrupt too)
            failed_at = block["line"]
            frames = e.__traceback__.tb_next if e.__traceback__ else None  # from the doc's
            tb = traceback.format_exception(type(e), e, frames)
            results.append({"outcome": "failed", "error": f"{type(e).__name__}: {e}",
                            "traceback": "".join(tb)})
        with open(out_path, "w") as f:
            json.dump(results, f)  # what ran so far, should the process die
    with open(out_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    sys.path[0] = ""  # as in an interactive interpreter: the working directory, not tests/python
    run_blocks(sys.argv[1], sys.argv[2])
    sys.exit(0)


# ---- The suite ---------------------------------------------------------------

import pytest  # noqa: E402 (the runner above needs nothing but the standard library)
import torch  # noqa: E402

from conftest import SOURCE  # noqa: E402

TORCH_MAJOR = int(torch.__version__.split(".")[0])


def _has_dcp():
    try:
        import torch.distributed.checkpoint.state_dict  # noqa: F401
    except ImportError:
        return False
    return True


def _missing(need):
    """Why this interpreter cannot run a block that needs `need`, or None."""
    if need == "torch2":
        return None if TORCH_MAJOR >= 2 else f"needs torch 2 (this is torch {torch.__version__})"
    if need == "lightning":
        return None if importlib.util.find_spec("lightning") else "needs Lightning (not installed)"
    if need == "dcp":
        return None if _has_dcp() else (
            f"needs torch.distributed.checkpoint's state_dict API (torch {torch.__version__})")
    if need == "mpi4py":
        return None if importlib.util.find_spec("mpi4py") else "needs mpi4py (not installed)"
    if need == "cuda":
        return None if torch.cuda.is_available() else "needs a CUDA device"
    if need == "torchrun":
        return None
    raise ValueError(f"unknown need '{need}' (known: torch2, lightning, dcp, mpi4py, cuda, torchrun)")


def _docs():
    paths = [os.path.join(SOURCE, "README.md")]
    paths += sorted(glob.glob(os.path.join(SOURCE, "docs", "*.md")))
    docs = []
    for path in paths:
        with open(path) as f:
            blocks = extract_blocks(os.path.relpath(path, SOURCE), f.read())
        if blocks:
            docs.append((os.path.relpath(path, SOURCE), blocks))
    return docs


DOCS = _docs()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _skip_reason(doc, block):
    """Why the block is not run here, or None; a bad marker is an error
    naming the doc and the line."""
    m = block["markers"]
    if "not-run" in m:
        if not m["not-run"]:
            raise ValueError(f"{doc}:{block['line']}: <!-- not-run: --> needs a reason")
        return m["not-run"]
    if "example" in m:
        return None  # checked apart: another suite runs it
    reasons = []
    for need in (n.strip() for n in m.get("needs", "").split(",") if n.strip()):
        try:
            reasons.append(_missing(need))  # every need checked, so a misspelt one fails anywhere
        except ValueError as e:
            raise ValueError(f"{doc}:{block['line']}: {e}") from None
    return next((r for r in reasons if r), None)


_RESULTS = {}


def _run_doc(doc, blocks, tmp_path_factory):
    """Runs one doc's blocks in their own process, once; one result a block."""
    if doc in _RESULTS:
        return _RESULTS[doc]
    work = tmp_path_factory.mktemp(re.sub(r"[^A-Za-z0-9]+", "_", doc))
    run = [_skip_reason(doc, b) is None and "example" not in b["markers"] for b in blocks]
    spec = {"doc": doc, "blocks": [dict(b, run=r) for b, r in zip(blocks, run)]}
    spec_path, out_path = work / "spec.json", work / "results.json"
    spec_path.write_text(json.dumps(spec))
    cwd = work / "cwd"
    cwd.mkdir()
    env = dict(os.environ)
    # The package under test, wherever the doc's process works.
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in
                                        env.get("PYTHONPATH", "").split(os.pathsep) if p)
    if any("torchrun" in b["markers"].get("needs", "") for b in blocks):
        env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), str(spec_path),
                               str(out_path)], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=DOC_TIMEOUT_S)
        ended = f"exit status {proc.returncode}"
        output = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        ended = f"killed after {DOC_TIMEOUT_S} s"
        output = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(
            errors="replace")
    results: List[Dict[str, Any]] = (json.loads(out_path.read_text()) if out_path.exists()
                                     else [])
    # A process that died inside a block (a crash, os._exit, the timeout)
    # leaves that block without a result, and the rest.
    if len(results) < len(blocks):
        results.append({"outcome": "died", "error": ended, "traceback": output[-4000:]})
    _RESULTS[doc] = (results, output)
    return _RESULTS[doc]


CASES = [(doc, i) for doc, blocks in DOCS for i, b in enumerate(blocks)
         if "example" not in b["markers"]]


@pytest.mark.parametrize("doc,index", CASES,
                         ids=[f"{doc}:{dict(DOCS)[doc][i]['line']}" for doc, i in CASES])
def test_doc_example_runs(doc, index, tmp_path_factory):
    blocks = dict(DOCS)[doc]
    block = blocks[index]
    where = f"{doc}, the ```python block at line {block['line']}"
    reason = _skip_reason(doc, block)
    if reason:
        pytest.skip(f"{where}: {reason}")
    results, output = _run_doc(doc, blocks, tmp_path_factory)
    if index >= len(results):
        pytest.skip(f"{where}: not run, as the doc's process died in an earlier block")
    r = results[index]
    if r["outcome"] == "not-run":
        pytest.skip(f"{where}: not run, as the block at line {r['after']} failed")
    if r["outcome"] in ("failed", "died"):
        shown = f"\n--- the doc's output:\n{output[-4000:]}" if output.strip() else ""
        pytest.fail(f"{where} fails: {r['error']}\n{r['traceback']}{shown}", pytrace=False)
    assert r["outcome"] == "passed", r


EXAMPLES = [(doc, b) for doc, blocks in DOCS for b in blocks if "example" in b["markers"]]


@pytest.mark.parametrize("doc,block", EXAMPLES,
                         ids=[f"{doc}:{b['line']}" for doc, b in EXAMPLES])
def test_example_scripts_are_run_by_a_suite(doc, block):
    """A script marked <!-- example: NAME --> compiles, and a suite of
    tests/python runs it (doc_example(..., "NAME"))."""
    name = block["markers"]["example"]
    compile("\n" * (block["code_line"] - 1) + block["code"], doc, "exec")
    used = re.compile(r"doc_example\(\s*\"" + re.escape(os.path.basename(doc)) + r"\"\s*,\s*\"" +
                      re.escape(name) + r"\"")
    suites = [p for p in glob.glob(os.path.join(SOURCE, "tests", "python", "test_*.py"))
              if used.search(open(p).read())]
    assert suites, (f"{doc}, the ```python block at line {block['line']}: script '{name}' is "
                    "run by no suite of tests/python (doc_example(...) finds none)")


def test_extraction_keeps_order_markers_and_lines(tmp_path):
    text = "\n".join([
        "# T",                                  # 1
        "```python",                            # 2
        "a = 1",                                # 3
        "```",                                  # 4
        "<!-- not-run: needs 2 GPUs -->",       # 5
        "```python",                            # 6
        "b = a",                                # 7
        "```",                                  # 8
        "- item:",                              # 9
        "",                                     # 10
        "  <!-- needs: torch2, lightning -->",  # 11
        "  ```python",                          # 12
        "  if a:",                              # 13
        "      c = 2",                          # 14
        "  ```",                                # 15
        "```sh",                                # 16
        "echo no",                              # 17
        "```",                                  # 18
    ])
    blocks = extract_blocks("T.md", text)
    assert [b["line"] for b in blocks] == [2, 6, 12]
    assert [b["code"] for b in blocks] == ["a = 1\n", "b = a\n", "if a:\n    c = 2\n"]
    assert blocks[1]["markers"] == {"not-run": "needs 2 GPUs"}
    assert blocks[2]["markers"] == {"needs": "torch2, lightning"}
    with pytest.raises(ValueError, match="T.md:1: a ```python block that never closes"):
        extract_blocks("T.md", "```python\nx = 1\n")


def test_a_broken_example_is_reported_with_doc_line_and_error(tmp_path):
    """The runner names the error, and its traceback the doc's line."""
    text = "```python\nx = 1\n```\n\n```python\ny = x + 1\nz = undefined_name\n```\n"
    blocks = extract_blocks("docs/BROKEN.md", text)
    spec = tmp_path / "spec.json"
    out = tmp_path / "out.json"
    spec.write_text(json.dumps({"doc": "docs/BROKEN.md",
                                "blocks": [dict(b, run=True) for b in blocks + blocks[:1]]}))
    subprocess.run([sys.executable, os.path.abspath(__file__), str(spec), str(out)], check=True,
                   cwd=tmp_path)
    results = json.loads(out.read_text())
    assert [r["outcome"] for r in results] == ["passed", "failed", "not-run"]
    assert results[1]["error"] == "NameError: name 'undefined_name' is not defined"
    assert 'File "docs/BROKEN.md", line 7' in results[1]["traceback"]
    assert results[2]["after"] == 5


def test_a_bad_marker_names_the_doc_and_line():
    with pytest.raises(ValueError, match=r"docs/X.md:3: unknown need 'gpus' \(known: torch2"):
        _skip_reason("docs/X.md", {"line": 3, "markers": {"needs": "torch2, gpus"}})
    with pytest.raises(ValueError, match=r"docs/X.md:7: <!-- not-run: --> needs a reason"):
        _skip_reason("docs/X.md", {"line": 7, "markers": {"not-run": ""}})
    assert _skip_reason("docs/X.md", {"line": 9, "markers": {"not-run": "needs 2 GPUs"}}) == (
        "needs 2 GPUs")
