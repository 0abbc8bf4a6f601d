import subprocess
import sys

from normlab.lab.cli import main
from normlab.lab.commands import check


def test_every_op_passes_and_the_table_names_them(capsys):
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    for op in ["layer_norm", "rms_norm", "batch_norm(train, mask)", "dyt", "dropout", "linear",
               "embedding", "gelu(erf)", "swiglu", "softmax", "attention(qk-norm, rope, cap)",
               "cross_entropy(cap, z, smooth)", "derf", "sigmoid_gate", "attention(sigmoid)",
               "l2_normalize (nGPT)", "ngpt_update", "ngpt_qk(rope)"]:
        assert op in out
    assert "FAIL" not in out and "bfloat16" in out


def _public_forwards() -> dict[str, object]:
    import importlib
    import pkgutil

    import normlab.functional as F

    found = {}
    for info in pkgutil.iter_modules(F.__path__):
        mod = importlib.import_module(f"normlab.functional.{info.name}")
        for name, obj in vars(mod).items():
            if (name.endswith("_forward") and not name.startswith("_") and callable(obj)
                    and getattr(obj, "__module__", "") == mod.__name__):
                found[name] = obj
    return found


def test_every_public_forward_is_checked_or_named_with_where_it_is_checked():
    checked = {op.checks() for op in check.op_checks()}
    forwards = _public_forwards()
    assert {"derf_forward", "ngpt_update_forward", "sigmoid_gate_forward"} <= set(forwards)
    missing = sorted(set(forwards) - checked - set(check.CHECKED_ELSEWHERE))
    assert not missing, f"neither in normlab check nor in CHECKED_ELSEWHERE: {missing}"
    stale = sorted(set(check.CHECKED_ELSEWHERE) - set(forwards))
    assert not stale, f"CHECKED_ELSEWHERE names no public forward: {stale}"
    assert not set(check.CHECKED_ELSEWHERE) & checked


def test_a_wrong_backward_fails_the_check():
    ops = check.op_checks()
    ln = ops[0]
    broken = check.OpCheck(ln.name, ln.inputs, ln.forward,
                           lambda d, c: tuple(g * 1.5 for g in ln.backward(d, c)))
    rows = check.run_checks([broken])
    assert not any(r.ok for r in rows)


def test_help_and_exit_status():
    done = subprocess.run([sys.executable, "-m", "normlab.lab", "--help"], capture_output=True,
                          text=True)
    assert done.returncode == 0 and "check" in done.stdout


def test_importing_normlab_does_not_import_the_lab():
    code = ("import sys, normlab, normlab.functional, normlab.nn, normlab.testing; "
            "bad = [m for m in ('normlab.lab', 'matplotlib', 'rich', 'torch', 'ray') "
            "if m in sys.modules]; print(bad)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_usage_error_is_one_line_and_exit_2(monkeypatch, capsys):
    from normlab.lab import cli

    def bad(args):
        raise cli.UsageError("--rows must be an integer >= 1; got -1")

    monkeypatch.setattr("normlab.lab.commands.list.main", bad)
    assert cli.main(["list"]) == 2
    err = capsys.readouterr().err
    assert err == "normlab list: error: --rows must be an integer >= 1; got -1\n"
