"""norm-placement-depth's register: its "trains" rows are trains-or-stalls claims on the Markov
source (whose floor every arm that trains reaches), so the words that read as a quality claim
("depth never hurts it") are gone from the row and the record, with the committed rows kept."""

from normlab.lab import framework as E
from normlab.lab import register
from normlab.lab.experiments import norm_placement_depth as N


def test_the_trains_rows_say_trains_and_keep_the_markov_source():
    rec = next(r for r in N.REGISTER if r.id == "pre-trains-at-every-depth")
    assert rec.claim == "Pre-LN trains at every depth" and rec.form == "non-inferiority"
    for size in ("quick", "full"):
        base = E.configure(N, size).base
        assert base.data == "markov" and base.markov_order == 1
    words = next(a for a in N.AMENDMENTS
                 if a.id == "pre-trains-at-every-depth" and a.date == "2026-12-07")
    assert words.before == {"claim": "Pre-LN trains at every depth (depth never hurts it)"}
    assert not words.remeasure
    assert {s: r["status"] for s, r in words.results_before.items()} == {"quick": "pass",
                                                                        "full": "pass"}
    register.validate(N)


def test_the_row_reads_the_record_claim():
    data = {"depths": [1, 3], "floor": 1.14, "ln_v": 2.77,
            "loss": {p: [1.2, 1.2] for p in N.PLACEMENTS},
            "seed_loss": {p: [[1.2 + 0.01 * i, 1.21], [1.19, 1.2 + 0.003 * i]]
                          for i, p in enumerate(N.PLACEMENTS)},
            "diverged": {p: [0, 0] for p in N.PLACEMENTS}}
    checks = N.judge(data, E.configure(N, "tiny"))
    row = next(c for c in checks if c.id == "pre-trains-at-every-depth")
    assert row.claim == "Pre-LN trains at every depth"
    register.check_rows(N, checks, "quick")
