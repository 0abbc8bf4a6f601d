"""``normlab inspect --torch`` on a family normlab's GPT cannot express: a small random Phi-3
written by transformers' ``save_pretrained``, its page rendered by headless Chromium into
docs/img/inspect-torch-phi3.png (the screenshot in docs/torch.md).

    python tools/torch_inspect_page.py [--chromium /usr/bin/chromium]

The page is checked as Chromium renders it: the DOM it builds holds every section of the page
and no NaN; the screenshot is written only when that holds.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers

from normlab.lab.cli import main as normlab

ROOT = Path(__file__).resolve().parents[1]
PNG = ROOT / "docs" / "img" / "inspect-torch-phi3.png"
SECTIONS = ("Tensors: precision headroom", "Phi3ForCausalLM")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]


def page(tmp: Path) -> Path:
    """The inspect page of a 4-layer random Phi-3 on 129 random tokens."""
    torch.manual_seed(0)
    cfg = transformers.Phi3Config(vocab_size=512, hidden_size=128, intermediate_size=256,
                                  num_hidden_layers=4, num_attention_heads=8,
                                  num_key_value_heads=4, max_position_embeddings=256,
                                  pad_token_id=0)
    transformers.Phi3ForCausalLM(cfg).save_pretrained(tmp / "phi3")
    np.save(tmp / "ids.npy", np.random.default_rng(0).integers(0, 512, 129))
    rc = normlab(["inspect", str(tmp / "phi3"), "--tokens", str(tmp / "ids.npy"), "--torch",
                  "--out", str(tmp / "out")])
    if rc:
        raise SystemExit(f"normlab inspect --torch failed ({rc})")
    return tmp / "out" / "inspect.html"


def chromium(binary: str, user_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *FLAGS, f"--user-data-dir={user_dir}", *args],
                          capture_output=True, text=True, timeout=120, check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        html = page(tmp)
        dom = chromium(args.chromium, tmp / "profile", "--dump-dom", html.as_uri()).stdout
        missing = [s for s in SECTIONS if s not in dom]
        if missing or "NaN" in dom:
            print(f"the rendered page lacks {missing} or shows NaN", file=sys.stderr)
            return 1
        shot = tmp / "page.png"
        chromium(args.chromium, tmp / "profile", f"--screenshot={shot}",
                 "--window-size=1280,2400", html.as_uri())
        PNG.write_bytes(shot.read_bytes())
    print(f"{PNG.relative_to(ROOT)}: the rendered page has {', '.join(SECTIONS)} and no NaN")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
