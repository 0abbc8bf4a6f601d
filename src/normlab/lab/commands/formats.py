"""``normlab formats``: the number formats normlab knows, as a table.

    normlab formats                        # the table: bits, range, precision, inf/NaN
    normlab formats --values float4_e2m1fn  # every finite value of a small format
    normlab formats --policies             # the precision-policy presets, role by role
"""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--values", metavar="FORMAT", nargs="+", default=[],
                   help="list every finite value of these formats (at most 8 bits)")
    p.add_argument("--policies", action="store_true",
                   help="also print the precision-policy presets")


def check_values(names: list[str]) -> list:
    """``--values``' formats, each known and of at most 8 bits; refused (UsageError) otherwise."""
    from ...precision import get_format
    from ..cli import UsageError

    formats = []
    for name in names:
        try:
            fmt = get_format(name, "--values")
        except (TypeError, ValueError) as exc:
            raise UsageError(str(exc)) from None
        if fmt.bits > 8:
            raise UsageError(f"--values lists formats of at most 8 bits; {name} has {fmt.bits}")
        formats.append(fmt)
    return formats


def main(args: argparse.Namespace) -> int:
    from ...precision import PRESETS, format_table

    formats = check_values(args.values)
    print(format_table())
    print()
    print("eps = 2^-M, the gap above 1.0 (unit roundoff u = eps/2). Names are ml_dtypes'; "
          "tfloat32 is stored in float32.\n'fn': no infinities, NaN only at the all-ones code "
          "(e4m3fn: 464 -> 448, 465 -> NaN; saturate with overflow=\"saturate\").\n"
          "float8_e8m0fnu is the MX scale: unsigned powers of two 2^-127 .. 2^127, no zero, "
          "0xFF = NaN.")
    for fmt in formats:
        print()
        print(fmt.describe())
        print("  " + " ".join(f"{v:g}" for v in fmt.values()))
    if args.policies:
        for policy in PRESETS.values():
            print()
            print(policy.describe())
    return 0
