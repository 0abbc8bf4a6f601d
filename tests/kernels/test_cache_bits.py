"""A kernel gives the same bits whether its process compiled it or loaded it from numba's disk
cache: every op of ``normlab.kernels.OPS`` (and the ensemble's grouped norms and AdamW's update)
runs in a first process with an empty ``NUMBA_CACHE_DIR``, which compiles and stores, and in a
second that loads, and the outputs' SHA-256 digests must be equal. (A reduction compiled with the
'nsz' fast-math flag and called from another kernel gave RMSNorm an input gradient that differed
in its last bits between the two.)"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np


def _h(*arrays) -> str:
    m = hashlib.sha256()
    for a in arrays:
        if isinstance(a, (tuple, list)):
            m.update(_h(*a).encode())
        elif isinstance(a, np.ndarray):
            m.update(np.ascontiguousarray(a).tobytes())
    return m.hexdigest()


def _digests() -> dict:
    from normlab import kernels as K
    from normlab.kernels import norms as N
    from normlab.kernels import optim as O

    rng = np.random.default_rng(0)
    out = {}
    for C in (32, 33, 768):
        x = rng.standard_normal((64, C)).astype(np.float32)
        g = rng.standard_normal((64, C)).astype(np.float32)
        w = rng.standard_normal(C).astype(np.float32)
        b = rng.standard_normal(C).astype(np.float32)
        y, c = K.layer_norm_forward(x, w, b)
        out[f"layer_norm {C}"] = _h(y, K.layer_norm_backward(g, c))
        y, c = K.rms_norm_forward(x, w)
        out[f"rms_norm {C}"] = _h(y, K.rms_norm_backward(g, c))
        (y, r), c = K.add_norm_forward(x, g, w, b)
        out[f"add_norm {C}"] = _h(y, r, K.add_norm_backward((g, g), c))
        y, c = K.softmax_forward(x)
        out[f"softmax {C}"] = _h(y, K.softmax_backward(g, c))
        t = rng.integers(0, C, 64)
        loss, c = K.cross_entropy_forward(x, t)
        dlogits, _ = K.cross_entropy_backward(np.ones(()), c)
        out[f"cross_entropy {C}"] = _h(np.asarray(loss), dlogits)
        y, c = K.gelu_forward(x)
        out[f"gelu {C}"] = _h(y, K.gelu_backward(g, c))
        xm, gm, wm = x.reshape(2, 32, C), g.reshape(2, 32, C), np.stack([w, b])
        y, c = N.rms_norm_forward_members(xm, wm)
        out[f"rms_norm members {C}"] = _h(y, N.rms_norm_backward_members(gm, c))
        y, c = N.layer_norm_forward_members(xm, wm, wm[::-1].copy())
        out[f"layer_norm members {C}"] = _h(y, N.layer_norm_backward_members(gm, c))
    for cap, kv in ((None, 4), (3.0, 2)):  # the lanes' attention: exp, tanh, grouped heads
        q = rng.standard_normal((5, 4, 9, 8)).astype(np.float32)
        k, v = (rng.standard_normal((5, kv, 9, 8)).astype(np.float32) for _ in range(2))
        y, c = K.attention_forward(q, k, v, softcap=cap)
        out[f"attention {cap} {kv}"] = _h(y, c.softmax.p, K.attention_backward(q, c)[:3])
    p = rng.standard_normal(4096).astype(np.float32)
    m, v = np.zeros_like(p), np.zeros_like(p)
    sq = O.adamw_update(p, rng.standard_normal(4096).astype(np.float32), m, v,
                        np.array([0, 1000, 4096]), np.array([True, False]), lr=1e-3, b1=0.9,
                        b2=0.95, eps=1e-8, weight_decay=0.1, t=1)
    out["adamw"] = _h(p, m, v, sq)
    out["quantize"] = _h(K.quantize(rng.standard_normal(4096).astype(np.float32), "bfloat16"))
    return out


def test_a_kernel_loaded_from_the_disk_cache_gives_the_bits_it_gave_when_compiled(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    runs = []
    for k in range(2):  # the first compiles and stores, the second loads
        out = tmp_path / f"digests{k}.json"
        subprocess.run([sys.executable, __file__, str(out)], env=env, check=True, timeout=900)
        runs.append(json.loads(out.read_text()))
    assert any((tmp_path / "numba").rglob("*.nbc")), "nothing was cached: the test tests nothing"
    differ = [k for k in runs[0] if runs[0][k] != runs[1][k]]
    assert not differ, f"compiled and cached kernels differ: {differ}"


_RSTD = """
import numpy as np
from normlab import kernels as K
from normlab.precision import Accumulation
x = np.linspace(0.5, 1.5, 96, dtype=np.float32).reshape(3, 32)
print(K.rms_norm_forward(x, np.ones(32, np.float32), accumulate=Accumulation("bfloat16"))[1]
      .rstd.ravel().tolist())
"""


def test_an_edit_to_a_kernel_file_reaches_the_kernels_that_call_into_it(tmp_path):
    """numba checks a cached kernel against its own file only; the package keys its cache folder
    by the whole kernels package's source, so that an edit to ``accumulate.py`` reaches the
    RMSNorm kernel (in ``norms.py``) that calls its running sum, in a copy of the package."""
    import shutil

    import normlab

    src = tmp_path / "src"
    shutil.copytree(Path(normlab.__file__).parent, src / "normlab",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = str(src)

    def rstd() -> list:
        out = subprocess.run([sys.executable, "-c", _RSTD], env=env, check=True, timeout=900,
                             capture_output=True, text=True, cwd=tmp_path)
        return json.loads(out.stdout)

    before = rstd()
    acc = src / "normlab" / "kernels" / "accumulate.py"
    text = acc.read_text()
    assert text.count("    return total\n") == 1
    acc.write_text(text.replace("    return total\n", "    return 4.0 * total\n"))
    after = rstd()
    assert rstd() == after  # loaded from the new folder: the same bits
    np.testing.assert_allclose(np.array(after) * 2, before, rtol=1e-6)  # 1/sqrt(4 ms)
    folders = list((src / "normlab" / "kernels" / "__pycache__").glob("numba-*"))
    assert len(folders) == 2, folders


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(_digests()))
