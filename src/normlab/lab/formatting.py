"""The lab's one number formatter: every number a reader sees (a check's text, a headline, a
table of the report, the inspect page, a sweep summary, a benchmark column) is written by
:func:`fmt`.

The switching rule, written once:

- zero of either sign is ``0``; ``nan``, ``inf`` and ``-inf`` are written as such; ``None``
  (no value) is ``missing``, ``-`` unless the caller says otherwise;
- inside the window ``[1e-3, 1e5)`` of ``|x|``: ``digits`` significant digits in Python's
  general form (``0.00123``, ``1.23``, ``123``; from ``10**digits`` it is scientific itself:
  ``1.23e+03``);
- outside it: scientific with ``digits - 1`` decimals (``1.23e-04``, ``1.20e+05``).

A place that needs a fixed shape passes a format ``spec`` instead, applied to the number as
given (``format(x, spec)``) with no switching of its own: a fixed-width benchmark column
(``"9.2f"``), a signed gap (``"+.4f"``), a loss table to 0.0001 nats (``".4f"``), and the
intervals' texts (``".3g"``: Python's general rule, fixed down to ``1e-4``, the form the
committed results' intervals were written in).
"""

from __future__ import annotations

import math
from typing import SupportsFloat

# |x| inside [FIXED_FROM, FIXED_BELOW): fixed (general) form; outside: scientific
FIXED_FROM, FIXED_BELOW = 1e-3, 1e5


def fmt(x: SupportsFloat | None, digits: int = 3, *, spec: str | None = None,
        missing: str = "-") -> str:
    """``x`` for a reader: the lab's rule with ``digits`` significant digits (see the module),
    or ``format(x, spec)`` where a place needs a fixed shape; ``missing`` for None.

    >>> [fmt(v) for v in (0.001234, 12345.6, 1e-9, -0.0, float("nan"), None)]
    ['0.00123', '1.23e+04', '1.00e-09', '0', 'nan', '-']
    >>> fmt(0.000182, spec=".3g"), fmt(0.0047, spec="+.4f")
    ('0.000182', '+0.0047')
    """
    if x is None:
        return missing
    v = float(x)
    if spec is not None:
        return format(v, spec)
    if v == 0:
        return "0"
    if not math.isfinite(v):
        return repr(v)
    if FIXED_FROM <= abs(v) < FIXED_BELOW:
        return f"{v:.{digits}g}"
    return f"{v:.{max(digits - 1, 0)}e}"
