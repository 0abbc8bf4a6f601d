"""Record short runs' results with whatever normlab is first on sys.path (main's, read-only)."""
import hashlib
import json
import sys

import numpy as np

from normlab.models import GPTConfig
from normlab.train import TrainConfig
from normlab.train.trainer import Trainer

M = dict(vocab_size=16, seq_len=16, n_layers=2, d_model=32, n_heads=2)
def tc(model=None, **kw):
    return TrainConfig(model=GPTConfig(**{**M, **(model or {})}), **{**dict(
        steps=6, batch_size=4, warmup=2, eval_interval=3, eval_batches=2), **kw})

CASES = {
 "pre_fp32": tc(),
 "post_amp_bf16_sgd_dropout": tc({"placement": "post", "dropout": 0.1, "attn_dropout": 0.1},
                                 precision="amp_bf16", optimizer="sgd", lr=0.05),
 "sandwich_rmsnorm_fp8_hybrid": tc({"placement": "sandwich", "norm": "rmsnorm"},
                                   precision="fp8_hybrid"),
 "admin_amp_fp16_headroom": tc({"placement": "admin"}, precision="amp_fp16", eval_headroom=True),
 "rezero_pure_bf16_probe": tc({"placement": "rezero", "tie_embeddings": True},
                              precision="pure_bf16", update_probe=4),
 "deepnorm_dyt_mxfp8_mult": tc({"placement": "deepnorm", "norm": "dyt", "d_model": 32},
                               precision="mxfp8", loss_multiplier=0.25, grad_clip=None),
 "none_diverges": tc({"placement": "none", "norm": "none"}, lr=30.0, warmup=0,
                     schedule="constant", steps=12, divergence_factor=1.5),
 # the lab's recipes that read the per-step metrics, shortened
 "attention_logit_growth": tc({"seq_len": 32, "init": "fan_in", "positions": "rope",
                               "norm_eps": 1e-6, "z_loss": 1e-4}, data="pydoc", lr=1e-2,
                              min_lr=1e-5, schedule="cosine", batch_size=8, weight_decay=1e-2),
 "output_logit_divergence": tc({"vocab_size": 200, "seq_len": 32, "qk_norm": "layernorm",
                                "init": "fan_in", "positions": "rope", "norm_eps": 1e-6},
                               data="markov", markov_order=1, markov_alpha=0.05, markov_zipf=1.2,
                               lr=0.1, warmup=3, schedule="constant", batch_size=8,
                               weight_decay=0.0, steps=8),
 "massive_activations": tc({"vocab_size": 64, "seq_len": 32, "n_layers": 3, "n_heads": 4,
                            "init_std": 32**-0.5}, data="pydoc", lr=1e-2, eval_headroom=True),
 "deepnet_update": tc({"n_layers": 4, "n_heads": 4, "init_std": 32**-0.5, "init": "xavier",
                       "embed_scale": 32**0.5, "placement": "post"}, data="markov",
                      markov_order=1, lr=1e-3, warmup=0, beta2=0.98, weight_decay=0.0,
                      grad_clip=None, update_probe=5),
 "lr_sensitivity_recipes": tc({"qk_norm": "layernorm", "z_loss": 1e-4, "norm_eps": 1e-6,
                               "init_std": 32**-0.5}, data="markov", markov_order=1, lr=0.3,
                              min_lr=1e-5),
}

def digest(params):
    h = hashlib.sha256()
    for p in params.values():  # in the model's order; by value, not by name
        h.update(np.ascontiguousarray(p).tobytes())
    return h.hexdigest()

out = {}
for name, cfg in CASES.items():
    t = Trainer(cfg)
    r = t.run().to_dict()
    for k in ("wall_time_s", "tokens_per_s"):
        r.pop(k)
    r["params_sha256"] = digest(t.params)
    out[name] = {"config": cfg.to_dict(), "result": r}
    print(name, r["stopped"], r["final_val_loss"], file=sys.stderr)
json.dump(out, open(sys.argv[1], "w"), indent=1, allow_nan=False)
