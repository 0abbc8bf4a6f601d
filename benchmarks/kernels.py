"""The fused kernels against the NumPy reference, PyTorch CPU and a plain copy of the same
bytes, side by side: the script form of ``normlab bench`` (same options, same output).

    python benchmarks/kernels.py [--rows 8192] [--widths 768 1024 4096] [--repeats 10] [--json PATH]
"""

import argparse
import sys

from normlab.lab.commands import bench

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bench.add_arguments(parser)
    sys.exit(bench.main(parser.parse_args()))
