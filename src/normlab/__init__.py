"""normlab: normalization, residual design and numeric precision in deep Transformers.

The core (``functional``, ``nn``, ``models``, ``train``, ``precision``, ``kernels``,
``testing``) depends on NumPy and ml_dtypes only; ``normlab.lab`` (experiments, report, CLI)
is the only place that imports matplotlib, rich or ray, and the core never imports it.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
