"""The lab's experiments, one module each (module names with underscores, CLI names with hyphens).

Each module reads top to bottom as ``CARD``, ``Config`` (defaults = the quick size) with
``SIZES``, ``measure(config, ctx) -> data``, ``judge(data, config) -> [Check]``,
``headline(data, config)`` and ``plot(result, out_dir)``; its longer notes are
``notes/<module>.md``. See ``normlab.lab.framework`` and docs/architecture.md. A new experiment is
a new module plus one line here.
"""

# CLI name -> module, in the report's order.
EXPERIMENTS: dict[str, str] = {
    "residual-growth": "normlab.lab.experiments.residual_growth",
    "gradients-at-init": "normlab.lab.experiments.gradients_at_init",
    "output-change": "normlab.lab.experiments.output_change",
    "batchnorm-vs-layernorm": "normlab.lab.experiments.batchnorm_vs_layernorm",
    "invariances-and-cost": "normlab.lab.experiments.invariances_and_cost",
    "precision-basics": "normlab.lab.experiments.precision_basics",
    "dropout": "normlab.lab.experiments.dropout",
    "attention-logit-growth": "normlab.lab.experiments.attention_logit_growth",
    "output-logit-divergence": "normlab.lab.experiments.output_logit_divergence",
    "precision-recipes": "normlab.lab.experiments.precision_recipes",
    "accumulation-precision": "normlab.lab.experiments.accumulation_precision",
    "warmup": "normlab.lab.experiments.warmup",
    "dyt": "normlab.lab.experiments.dyt",
    "norm-placement-depth": "normlab.lab.experiments.norm_placement_depth",
    "admin": "normlab.lab.experiments.admin",
    "post-vs-pre-quality": "normlab.lab.experiments.post_vs_pre_quality",
    "rmsnorm-quality": "normlab.lab.experiments.rmsnorm_quality",
    "layernorm-jacobian": "normlab.lab.experiments.layernorm_jacobian",
    "lr-sensitivity-recipes": "normlab.lab.experiments.lr_sensitivity_recipes",
    "massive-activations": "normlab.lab.experiments.massive_activations",
    "deepnet-update": "normlab.lab.experiments.deepnet_update",
    "internal-covariate-shift": "normlab.lab.experiments.internal_covariate_shift",
    "residual-and-final-norm": "normlab.lab.experiments.residual_and_final_norm",
    "ngpt-speedup": "normlab.lab.experiments.ngpt_speedup",
    "norm-and-learning-rate": "normlab.lab.experiments.norm_and_learning_rate",
    "rescaling-not-centering": "normlab.lab.experiments.rescaling_not_centering",
    "derf": "normlab.lab.experiments.derf",
    "layernorm-scaling": "normlab.lab.experiments.layernorm_scaling",
    "mix-ln": "normlab.lab.experiments.mix_ln",
    "nvfp4-recipe-parts": "normlab.lab.experiments.nvfp4_recipe_parts",
    "attention-sinks": "normlab.lab.experiments.attention_sinks",
    "mxfp8-scale-rule": "normlab.lab.experiments.mxfp8_scale_rule",
    "frontier-numerics": "normlab.lab.experiments.frontier_numerics",
    "optimizer-state-precision": "normlab.lab.experiments.optimizer_state_precision",
    "mxfp4-sr-rht": "normlab.lab.experiments.mxfp4_sr_rht",
    "fp4-all-the-way": "normlab.lab.experiments.fp4_all_the_way",
    "dropout-regularizes": "normlab.lab.experiments.dropout_regularizes",
    "final-logit-softcap": "normlab.lab.experiments.final_logit_softcap",
    "final-norm": "normlab.lab.experiments.final_norm",
}
