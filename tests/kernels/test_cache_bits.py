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


if __name__ == "__main__":
    from pathlib import Path

    Path(sys.argv[1]).write_text(json.dumps(_digests()))
