"""``normlab formats`` prints the format table (and values and policies on request)."""

from normlab.lab import cli
from normlab.precision import FORMATS


def test_formats_prints_the_table(capsys):
    assert cli.main(["formats"]) == 0
    out = capsys.readouterr().out
    for name in FORMATS:
        assert name in out
    assert "448" in out and "57344" in out and "65504" in out


def test_formats_values_and_policies(capsys):
    assert cli.main(["formats", "--values", "float4_e2m1fn", "--policies"]) == 0
    out = capsys.readouterr().out
    assert "-6 -4 -3 -2 -1.5 -1 -0.5 0 0.5 1 1.5 2 3 4 6" in out
    assert "policy fp8_hybrid" in out and "float8_e5m2, delayed scaling" in out


def test_formats_refuses_unknown_and_wide_formats(capsys):
    assert cli.main(["formats", "--values", "bf16"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "normlab formats: error: --values: unknown format" in out.err
    assert "known formats" in out.err  # refused before the table is printed
    assert cli.main(["formats", "--values", "bfloat16"]) == 2
    assert "at most 8 bits" in capsys.readouterr().err
