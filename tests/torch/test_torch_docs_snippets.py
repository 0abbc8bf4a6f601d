"""docs/torch.md's snippets, executed exactly as printed: every ```python block (each in a fresh
namespace) and every ```bash block (with this environment's commands on PATH), in the page's
order, in one scratch folder (a later block may read a file an earlier one wrote). The lists
the page quotes are the code's."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from normlab.torch.autocast import FLOAT32, LOWER

pytest.importorskip("transformers")
DOC = Path(__file__).resolve().parents[2] / "docs" / "torch.md"
FENCE = re.compile(r"^```(python|bash)\n(.*?)^```$", re.S | re.M)


def snippets() -> list[tuple[str, int, str]]:
    """(language, line, code) of every fenced python or bash block of the page."""
    text = DOC.read_text()
    return [(m.group(1), text[:m.start()].count("\n") + 1, m.group(2))
            for m in FENCE.finditer(text)]


def test_the_page_has_its_snippets():
    langs = [lang for lang, _, _ in snippets()]
    assert langs.count("python") >= 6 and "bash" in langs


def test_every_snippet_runs_as_printed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                                 f"{os.environ.get('PATH', '')}"}
    for lang, line, code in snippets():
        if lang == "python":
            exec(compile(code, f"{DOC}:{line}", "exec"), {"__name__": "__snippet__"})
        else:
            r = subprocess.run(["bash", "-e", "-c", code], env=env, capture_output=True,
                               text=True, timeout=600)
            assert r.returncode == 0, (line, r.stderr[-2000:])
    assert (tmp_path / "stats.jsonl").is_file() and (tmp_path / "nonfinite.json").is_file()
    assert (tmp_path / "my-model-inspect" / "inspect.json").is_file()


@pytest.mark.parametrize("key, names", [("autocast-lower", LOWER), ("autocast-float32", FLOAT32)])
def test_the_autocast_lists_are_the_codes(key, names):
    m = re.search(rf"<!-- {key} -->`([^`]*)`<!-- /{key} -->", DOC.read_text())
    assert m and m.group(1) == ", ".join(names), "write the list as normlab.torch.autocast has it"
