"""The report's summary (the tally of claims, checks and identities), the README block rendered
from it, ``normlab report --markdown`` and the committed results file kept equal to the README."""

import json
from pathlib import Path

import pytest

from normlab.lab import framework as E
from normlab.lab import results as R
from normlab.lab.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _result(name, checks):
    card = E.Card(name=name, title=name.title(), claim="a claim", published="pub", method="",
                  citation="Someone et al. 2020, 'Title'; chapter", short=f"{name} in short")
    return E.Result(card, "set", f"{name} measured", checks)


def _entries():
    def c(passed, **kw):
        return E.Check(claim="c", published="p", measured="m", rule="r", passed=passed, **kw)

    return [
        ("one", _result("one", [c(True), c(True), c(None), c(True, kind="identity")]), None, ""),
        ("two", _result("two", [c(True), c(False), c(None, inconclusive=True)]), None, ""),
        ("three", _result("three", [c(True, kind="identity"), c(True, kind="identity")]), None, ""),
        ("four", None, None, "Traceback\nValueError: boom"),
    ]


META = {"generated": "2026-12-02 10:00", "size": "quick", "seed": 0, "wall_s_experiments": 125.0,
        "wall_s_this_invocation": 130.0, "reused": [], "normlab": "0.1.0", "numpy": "2.4",
        "python": "3.11", "machine": "x86_64, 2 CPU(s) available",
        "threads": "OPENBLAS_NUM_THREADS=1, NUMBA_NUM_THREADS=1"}


def test_the_tally_counts_claims_checks_and_identities_apart():
    s = R.summarize(_entries(), META)
    t = s["tally"]
    assert (t["reproduced"], t["partly reproduced"], t[E.HOLDS], t["error"]) == (1, 1, 1, 1)
    assert t["claims"] == 2  # the identities-only experiment and the error are no claims
    assert (t["checks_counted"], t["checks_passed"], t["checks_inconclusive"]) == (5, 3, 1)
    assert (t["identities"], t["identities_hold"]) == (3, 3)
    assert R.headline(t) == ("1 of 2 empirical claims reproduced (1 partly): 3 of 5 counted "
                             "checks pass, 1 inconclusive; 3 of 3 identities hold; 1 experiment(s) "
                             "did not finish")
    assert s["experiments"][3] == {"name": "four", "verdict": "error",
                                   "measured": "ValueError: boom", "wall_s": None, "checks": []}
    json.dumps(s, allow_nan=False)


def test_the_markdown_block():
    text = R.markdown(R.summarize(_entries(), META))
    lines = text.splitlines()
    assert lines[0].startswith("**1 of 2 empirical claims reproduced") and "2 min 10 s" in lines[0]
    assert "seed 0" in lines[0] and "OPENBLAS_NUM_THREADS=1" in lines[0]
    head = next(i for i, line in enumerate(lines) if line.startswith("| Experiment |"))
    assert "Quick verdict | Full verdict" in lines[head] and len(lines) == head + 2 + 4
    assert "Student-t" in text and "95%" in text  # the confidence level is stated
    row = ("| `one` | one in short (Someone et al. 2020; chapter) | reproduced | not yet measured "
           "| one measured |")
    assert row in text
    full = R.summarize(_entries()[:1], {**META, "size": "full"})
    assert "| reproduced | reproduced | one measured |" in R.markdown(R.summarize(_entries(), META),
                                                                    full)


def test_update_readme_rewrites_only_the_block(tmp_path):
    s = R.summarize(_entries(), META)
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\nbefore\n{R.BEGIN}\nold table\n{R.END}\nafter\n")
    assert R.update_readme(readme, s)
    text = readme.read_text()
    assert text.startswith("# title\n\nbefore\n") and text.endswith(f"{R.END}\nafter\n")
    assert R.markdown(s, figure="docs/img/verdicts-quick.png") in text
    assert "old table" not in text
    assert not R.update_readme(readme, s)  # unchanged: not rewritten
    (tmp_path / "bare.md").write_text("no markers\n")
    with pytest.raises(ValueError, match="no generated lab block"):
        R.update_readme(tmp_path / "bare.md", s)


def test_report_markdown_from_the_command_line(tmp_path, capsys):
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps(R.summarize(_entries(), META)))
    assert main(["report", "--markdown", "--results", str(summary)]) == 0
    assert capsys.readouterr().out.strip() == R.markdown(json.loads(summary.read_text()))
    readme = tmp_path / "README.md"
    readme.write_text(f"x\n{R.BEGIN}\n{R.END}\n")
    assert main(["report", "--markdown", "--results", str(summary), "--readme", str(readme)]) == 0
    assert R.markdown(json.loads(summary.read_text()),
                      figure="docs/img/verdicts-quick.png") in readme.read_text()
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"size": "quick", "experiments": []}))
    for argv, flag in ((["--results", str(old)], "schema"),
                       (["--results", str(tmp_path / "none.json")], "--results"),
                       (["--results", str(summary), "--readme", str(tmp_path / "no.md")],
                        "--readme"),
                       (["--results", str(summary), "--check-results", str(summary)],
                        "--check-results"),  # the same seed: not a disjoint block
                       (["--seed", "1"], "measures nothing")):
        assert main(["report", "--markdown", *argv]) == 2
        assert flag in capsys.readouterr().err
    assert main(["report", "--readme", str(readme)]) == 2  # --readme only with --markdown
    assert "--markdown" in capsys.readouterr().err
    other = tmp_path / "seed10000.json"
    other.write_text(json.dumps({**json.loads(summary.read_text()), "seed": 10000}))
    assert main(["report", "--markdown", "--results", str(summary), "--check-results",
                 str(other)]) == 0
    assert "At a disjoint block of seeds** (seed 10000" in capsys.readouterr().out
    assert main(["report", "--check-results", str(other)]) == 2  # only with --markdown
    assert "--check-results" in capsys.readouterr().err


def test_the_full_block_comparison_names_the_experiments_it_holds(tmp_path, capsys):
    """``--full-check-results``: the full size at a disjoint block of seeds, set beside
    ``--full-results``; a block holding some of the experiments names them, and a verdict or a
    counted row that differs is listed with both states."""
    row = {"name": "a", "verdict": "reproduced", "checks": [
        {"kind": "claim", "status": "pass", "claim": "x"}]}
    full = {"size": "full", "seed": 0, "experiments": [row, {**row, "name": "b"}]}
    other = {"size": "full", "seed": 10000, "experiments": [
        {**row, "verdict": "partly reproduced",
         "checks": [{"kind": "claim", "status": "inconclusive", "claim": "x"}]}]}
    text = R.check_block(full, other)
    assert text.startswith("**At a disjoint block of seeds, full size** (seed 10000, "
                           "`docs/results/full-seed10000.json`, "
                           "`make check-block-full ONLY=NAME`)")
    assert "the same verdict for 0 of 1 experiments measured there (`a`)" in text
    assert "(reproduced / partly reproduced)" in text and "(pass / inconclusive)" in text
    assert R.check_block(full, {**other, "experiments": [row, {**row, "name": "b"}]}).count(
        "measured there") == 0  # every experiment: nothing to name
    summary = ROOT / "docs" / "results" / "quick.json"
    fulls = ROOT / "docs" / "results" / "full.json"
    same = tmp_path / "same.json"
    same.write_text(fulls.read_text())
    for argv in ([], ["--full-results", str(fulls)]):  # without --full-results; the same seed
        assert main(["report", "--markdown", "--results", str(summary), *argv,
                     "--full-check-results", str(same)]) == 2
        assert "--full-check-results" in capsys.readouterr().err
    assert main(["report", "--full-check-results", str(same)]) == 2  # only with --markdown
    assert "--full-check-results" in capsys.readouterr().err


def _committed():
    full = ROOT / "docs" / "results" / "full.json"
    return (json.loads((ROOT / "docs" / "results" / "quick.json").read_text()),
            json.loads(full.read_text()) if full.is_file() else None)


def _check_block(size: str = "quick"):
    path = ROOT / "docs" / "results" / f"{size}-seed10000.json"
    return json.loads(path.read_text()) if path.is_file() else None


def test_the_readme_table_is_the_committed_results_file():
    """The lab's tables are generated: docs/lab.md's table and the README's summary equal their
    rendering from docs/results/quick.json and docs/results/full.json (the full column 'not yet
    measured' until that file exists); ``make results`` / ``make tables`` regenerate them. It reads
    whichever layout the committed file has (schema 2 until the quick report is measured again)."""
    summary, full = _committed()
    check, full_check = _check_block(), _check_block("full")
    for path in (ROOT / "docs" / "lab.md", ROOT / "README.md"):
        text = path.read_text()
        assert R.blocks_of(text) and R.rendered(path, summary, full, check=check,
                                                full_check=full_check) == text, path
    if check is not None:  # a disjoint block of seeds at the same size
        assert check["size"] == summary["size"] and check["seed"] != summary["seed"]
    if full_check is not None:  # the full size's, some experiments measured at both blocks
        assert full is not None and full_check["size"] == "full"
        assert full_check["seed"] != full["seed"]
        assert {r["name"] for r in full_check["experiments"]} <= {
            r["name"] for r in full["experiments"]}
        assert "At a disjoint block of seeds" in (ROOT / "docs" / "lab.md").read_text()
    assert summary["size"] == "quick" and summary["schema"] in R.READABLE
    if full is None:
        assert R.NOT_MEASURED in (ROOT / "docs" / "lab.md").read_text()
    else:
        assert full["size"] == "full" and full["schema"] in R.READABLE
    committed = [r["name"] for r in summary["experiments"]]
    registered = list(E.registry())
    assert committed == [n for n in registered if n in committed]  # registered, in its order


def test_the_committed_forest_plot_was_drawn_from_the_committed_results():
    from normlab.lab.plotting import KEY_FIELD, forest_key, png_text

    summary, full = _committed()
    for s, name in ((summary, "verdicts-quick.png"), (full, "verdicts-full.png")):
        if s is not None:
            assert png_text(ROOT / "docs" / "img" / name)[KEY_FIELD] == forest_key(s), name


def _iv(lo, hi):
    from normlab.lab.stats import Interval

    return Interval((lo + hi) / 2, lo, hi, 5, "mean +- t se (95%)")


def _every_form(lo, hi):
    """One check of each rule form on the interval [lo, hi]."""
    kw = {"claim": "c", "published": "p", "interval": _iv(lo, hi)}
    return [E.Check.superiority(side="above", margin=0.1, **kw),
            E.Check.superiority(side="below", margin=-0.2, **kw),
            E.Check.non_inferiority(side="below", margin=0.3, **kw),
            E.Check.non_inferiority(side="above", margin=0.3, **kw),
            E.Check.equivalence(margin=0.5, centre=0.2, **kw),
            E.Check.band(lo=-1.0, hi=0.4, **kw),
            E.Check.decided(threshold=0.0, side="above", kind=E.PREMISE, **kw)]


def test_the_forest_plot_puts_every_form_on_its_margin():
    """Normalised to its margin, each row passes exactly when its whole bar lies right of 0,
    fails when it lies wholly left, and is inconclusive when it crosses 0: for every rule form,
    either passing side, bands, and rows written without their side (read back from the
    decision); its text gives the interval in the row's own units."""
    import numpy as np

    rng = np.random.default_rng(1)
    seen = set()
    for _ in range(300):
        lo, hi = np.sort(rng.uniform(-2, 2, 2))
        for c in _every_form(float(lo), float(hi)):
            row = R.check_row(c)
            for r in (row, {**row, "side": ""}):
                where = R.placement(r)
                if where is None:  # a row without its side, inconclusive: listed, not drawn
                    assert not r["side"] and len(r["threshold"]) == 1
                    assert r["status"] == E.INCONCLUSIVE
                    continue
                drawn = ("pass" if where["lo"] > 0 else "FAIL" if where["hi"] < 0
                         else E.INCONCLUSIVE)
                assert drawn == c.status or where["lo"] == 0 or where["hi"] == 0, (c, where)
                assert where["lo"] <= where["x"] <= where["hi"]
                seen.add(c.status)
    assert seen == {"pass", "FAIL", E.INCONCLUSIVE}
    summary = R.summarize([("one", _result("one", _every_form(0.5, 0.7) + [
        E.Check(claim="one number", published="p", measured="3", rule="r", passed=True),
        E.Check(claim="shown", published="p", measured="3", rule="r", passed=None,
                kind=E.SHOWN)]), None, "")], META)
    drawn, listed = R.forest_rows(summary)
    assert drawn[0]["kind"] == E.PREMISE  # premises first, marked apart
    assert len(drawn) == 7 and [x["claim"] for x in listed] == ["one number"]
    assert drawn[1]["text"] == "0.6 [0.5, 0.7] vs > 0.1"


def test_an_experiment_not_tested_is_counted_apart(tmp_path):
    """A failed premise: the verdict 'not tested at this size', its claims out of the counted
    checks, the premise counted, the headline and the table say so, the forest plot greys its
    claims (not judged) and still draws the premise."""
    kw = {"published": "p"}
    premise = E.Check.decided(claim="the no-fix arm diverges", interval=_iv(-1.0, -0.5),
                              threshold=0.0, side="above", kind=E.PREMISE, **kw)
    claim = E.Check.superiority(claim="the fix wins", interval=_iv(1.0, 2.0), side="above", **kw)
    entries = [("gated", _result("gated", [premise, claim]), None, ""),
               ("plain", _result("plain", [claim]), None, "")]
    s = R.summarize(entries, META)
    t = s["tally"]
    assert s["schema"] == R.SCHEMA == 3 and s["experiments"][0]["verdict"] == E.NOT_TESTED
    assert (t[E.NOT_TESTED], t["claims"], t["checks_counted"]) == (1, 1, 1)
    assert (t["premises"], t["premises_hold"]) == (1, 0)
    assert R.headline(t) == ("1 of 1 empirical claims reproduced: 1 of 1 counted checks pass; 0 "
                             "of 1 premises hold; 1 experiment not tested at this size (a premise "
                             "did not hold)")
    assert "| not tested at this size | not yet measured |" in R.markdown(s)
    drawn, _ = R.forest_rows(s)
    assert [(r["experiment"], r["kind"], r["judged"]) for r in drawn] == [
        ("gated", E.PREMISE, True), ("gated", E.CLAIM, False), ("plain", E.CLAIM, True)]
    from normlab.lab.plotting import KEY_FIELD, forest, forest_key, png_text

    assert forest(s, tmp_path) == "verdicts.png"
    assert png_text(tmp_path / "verdicts.png")[KEY_FIELD] == forest_key(s)


def test_the_full_column_from_a_full_report(with_fake, tmp_path, capsys):
    """The size of record's machinery with a stand-in: a --tiny report for the quick column and
    a --full report of the cheap fake experiment for the full one; the table reads the full
    verdict where the full summary has the experiment, 'not yet measured' elsewhere; a summary
    of another size is refused as --full-results; --forest draws the PNG; --readme rewrites every
    file named."""
    quick, full = tmp_path / "quick", tmp_path / "full"
    assert main(["report", "--tiny", "--only", "fake", "dropout", "--out", str(quick)]) == 0
    assert main(["report", "--full", "--only", "fake", "--out", str(full)]) == 0
    capsys.readouterr()
    assert json.loads((full / "summary.json").read_text())["size"] == "full"
    lab, readme = tmp_path / "docs" / "lab.md", tmp_path / "README.md"
    lab.parent.mkdir()
    lab.write_text(f"x\n{R.BEGIN}\n{R.END}\n")
    readme.write_text(f"y\n{R.SUMMARY_BEGIN}\n{R.SUMMARY_END}\n")
    png = tmp_path / "docs" / "img" / "verdicts-tiny.png"
    png.parent.mkdir()
    assert main(["report", "--markdown", "--results", str(quick / "summary.json"),
                 "--full-results", str(full / "summary.json"), "--forest", str(png),
                 "--readme", str(lab), str(readme)]) == 0
    table = lab.read_text()
    assert "| `fake` |" in table and "| reproduced | reproduced (at " in table  # which code
    assert "| identities hold | not yet measured |" in table  # dropout: no full result
    assert "img/verdicts-tiny.png" in table and png.is_file()
    assert "the full report in" in readme.read_text()
    assert ("It holds 1 of the 2 experiments; not yet measured at the full size: `dropout`"
            in readme.read_text())  # a partial full summary says what it lacks
    assert main(["report", "--markdown", "--results", str(quick / "summary.json"),
                 "--full-results", str(quick / "summary.json")]) == 2
    assert "not of the full size" in capsys.readouterr().err


def test_every_registered_experiment_is_in_the_committed_results():
    """A new experiment is not a failure before it is measured: it is reported as not measured
    yet, with the command that measures it alone and merges it in."""
    summary = json.loads((ROOT / "docs" / "results" / "quick.json").read_text())
    missing = [n for n in E.registry() if n not in {r["name"] for r in summary["experiments"]}]
    if missing:
        pytest.skip("not measured yet: " + ", ".join(missing) + " (make results ONLY=NAME "
                    "measures one and merges it into docs/results/quick.json and docs/lab.md)")


def _summary(names, size="quick", wall=1.0):
    entries = [(n, _result(n, [E.Check(claim="c", published="p", measured="m", rule="r",
                                       passed=True)]), None, "") for n in names]
    s = R.summarize(entries, {**META, "size": size})
    for row in s["experiments"]:
        row["wall_s"] = wall
    return s


def test_merge_puts_one_experiment_into_the_committed_results(tmp_path, capsys):
    committed = _summary(["one", "three"], wall=10.0)
    new = _summary(["two", "one"], wall=2.0)
    new["experiments"][1]["measured"] = "one measured again"
    merged = R.merge(committed, new, ["one", "two", "three"])
    assert [r["name"] for r in merged["experiments"]] == ["one", "two", "three"]
    assert merged["experiments"][0]["measured"] == "one measured again"
    assert merged["tally"]["experiments"] == 3 and merged["wall_s_experiments"] == 14.0
    # not one invocation's time any more: the table says the experiments' sum, and that it is one
    assert merged["wall_s_this_invocation"] is None
    assert "took 14 s of wall time, summed over its experiments" in R.markdown(merged)
    assert "took 2 min 10 s of wall time on" in R.markdown(committed)  # one whole invocation
    assert list(merged) == list(committed)
    with pytest.raises(ValueError, match="differ in size"):
        R.merge(committed, _summary(["two"], size="tiny"), ["one", "two", "three"])
    a, b = tmp_path / "quick.json", tmp_path / "new.json"
    a.write_text(json.dumps(committed))
    b.write_text(json.dumps(new))
    assert main(["report", "--merge", str(b), "--results", str(a)]) == 0
    assert json.loads(a.read_text())["tally"]["experiments"] == 3
    assert main(["report", "--merge", str(b)]) == 2  # --results names the file to rewrite
    assert "--merge" in capsys.readouterr().err


def test_short_citation_keeps_authors_and_years_and_drops_titles():
    cite = ("Zhu, Chen, He, LeCun & Liu 2025, 'Transformers without Normalization' (DyT), CVPR "
            "2025; Wang et al. 2022 (DeepNet); PaLM (Chowdhery et al. 2022) for the z-loss; "
            "NVIDIA TransformerEngine recipes (fp8_hybrid, MXFP8); the chapter, section 16.3")
    assert R.short_citation(cite) == (
        "Zhu et al. 2025; Wang et al. 2022 (DeepNet); PaLM (Chowdhery et al. 2022) for the "
        "z-loss; NVIDIA TransformerEngine recipes (fp8_hybrid, MXFP8); the chapter")


def test_every_card_has_a_short_claim_and_a_balanced_short_citation():
    import importlib

    from normlab.lab.experiments import EXPERIMENTS

    for name, module in EXPERIMENTS.items():
        card = importlib.import_module(module).CARD
        assert 0 < len(card.short) <= 170, f"{name}: the README's claim cell wants `short`"
        cite = R.short_citation(card.citation)
        assert cite and cite.count("(") == cite.count(")") and "'" not in cite, (name, cite)


def test_the_check_block_lists_every_verdict_and_counted_row_that_differs():
    a = R.summarize(_entries(), META)
    b = json.loads(json.dumps(a))
    b["seed"] = 10000
    assert "the same verdict for 4 of 4 experiments; 0 of 6 counted rows" in R.check_block(a, b)
    b["experiments"][1]["verdict"] = "not reproduced"
    b["experiments"][1]["checks"][0]["status"] = "FAIL"
    b["experiments"][1]["checks"][0]["claim"] = "a row whose text quotes a value"
    text = R.check_block(a, b)
    assert "3 of 4 experiments (differs: `two` (partly reproduced / not reproduced))" in text
    assert "1 of 6 counted rows change state (seed 0 / seed 10000): `two`" in text
    assert "(pass / FAIL)" in text and R.check_block(a, None) == ""
    b["experiments"][1]["checks"][0]["status"] = "shown"  # a claim whose arms were not run
    assert "(pass / not judged)" in R.check_block(a, b)
    assert "At a disjoint block of seeds" in R.markdown(a, check=b)


def test_the_check_block_pairs_claims_past_context_rows_one_block_lacks():
    """A premise that did not hold leaves out its arms' context rows: the claims after them
    are still paired with their own counterparts, and every one of them is listed."""
    premise = {"kind": "premise", "status": "pass", "claim": "p"}
    context = {"kind": "shown", "status": "shown", "claim": "context"}
    claims = [{"kind": "claim", "status": s, "claim": c} for c, s in
              (("c1", "pass"), ("c2", "inconclusive"))]
    row = {"name": "w", "verdict": "partly reproduced", "checks": [premise, context, *claims]}
    other = {"name": "w", "verdict": "not tested at this size", "checks": [
        {**premise, "status": "inconclusive"}, *({**c, "status": "shown"} for c in claims)]}
    text = R.check_block({"size": "full", "seed": 0, "experiments": [row]},
                         {"size": "full", "seed": 10000, "experiments": [other]})
    assert "3 of 3 counted rows change state" in text
    assert '"c1" (pass / not judged)' in text and '"c2" (inconclusive / not judged)' in text


def test_every_decided_row_of_the_committed_results_says_where_its_margin_comes_from():
    """A claim or a premise decided against a margin names the margin's source, in every
    committed results file (a direction says so: margin 0 and why the source gives no size)."""
    missing = []
    for path in sorted((ROOT / "docs" / "results").glob("*.json")):
        if path.name == "register.json":  # the claim register, not a results file
            continue
        for r in json.loads(path.read_text())["experiments"]:
            missing += [f"{path.name}: {r['name']}: {c['claim']}" for c in r["checks"]
                        if c.get("kind") in ("claim", "premise") and c.get("form")
                        and not c.get("margin_source")]
    assert not missing, missing
