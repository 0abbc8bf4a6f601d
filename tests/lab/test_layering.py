"""The core never imports the lab, matplotlib or rich."""

import subprocess
import sys


def test_core_does_not_import_the_lab():
    code = ("import sys, normlab, normlab.functional, normlab.nn, normlab.testing\n"
            "bad = [m for m in ('normlab.lab', 'matplotlib', 'rich') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lab_imports_plotting_lazily():
    code = ("import sys, normlab.lab.framework, normlab.lab.experiments.dropout\n"
            "assert 'matplotlib' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_report_needs_no_test_oracles():
    """`make demo` installs the lab extra only: the report's commands and every experiment load
    without torch or transformers."""
    code = ("import sys, importlib\n"
            "from normlab.lab import framework\n"
            "import normlab.lab.commands.report, normlab.lab.commands.run\n"
            "for name in framework.registry():\n"
            "    framework.load(name)\n"
            "bad = [m for m in ('torch', 'transformers') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)
