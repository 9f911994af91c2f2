"""benchmarks.tlx_goal_plot: issue 5's goal attainment from recorded benchmark rows."""

import json

import pytest

from benchmarks.tlx_goal_plot import attainment, main, read_run

PMA = {"name": "PMA q128 fill0.5", "floor_fwd_ms": 0.5, "varlen_fwd_ms": 1.0, "tlx_fwd_ms": 0.5,
       "varlen_fwdbwd_ms": 4.0, "tlx_fwdbwd_ms": 2.5}
SELF = {"name": "self B768 fill1.0", "floor_fwd_ms": 0.1, "varlen_fwd_ms": 3.0, "tlx_fwd_ms": 2.0,
        "varlen_fwdbwd_ms": 6.0, "tlx_fwdbwd_ms": 5.0, "tutorial_fwd_ms": 1.9}
DENSE = {"name": "dense B4 H32 N4096", "floor_fwd_ms": 0.1, "varlen_fwd_ms": 3.0, "tlx_fwd_ms": 2.0,
         "tutorial_fwd_ms": 1.8}


def test_pma_forward_goal_is_the_larger_of_half_varlen_and_the_padded_floor():
    got = attainment(PMA)
    assert got[("PMA q128 fill0.5", "fwd")] == pytest.approx(1.25 * 0.5 / 0.5)  # floor wins: 0.625 > 0.5
    assert got[("PMA q128 fill0.5", "fwd+bwd")] == pytest.approx(4.0 / 2 / 2.5)
    assert attainment(dict(PMA, floor_fwd_ms=0.1))[("PMA q128 fill0.5", "fwd")] == pytest.approx(0.5 / 0.5)


def test_pma_goals_also_on_the_issues_baseline_where_recorded():
    """Rows with the issue's baseline (`issue_varlen_*`, each against its own paired tlx timing)
    get a second PMA goal per pass; the pre-expanded varlen's goals are unchanged."""
    row = dict(PMA, floor_fwd_ms=0.1, issue_varlen_fwd_ms=1.6, tlx_fwd_vs_issue_ms=0.4,
               issue_varlen_fwdbwd_ms=5.0, tlx_fwdbwd_vs_issue_ms=2.0,
               issue_varlen_fwdbwd_ms_per_tlx=2.6)
    got = attainment(row)
    assert got[("PMA q128 fill0.5 (issue's varlen)", "fwd")] == pytest.approx(1.6 / 2 / 0.4)
    assert got[("PMA q128 fill0.5 (issue's varlen)", "fwd+bwd")] == pytest.approx(2.6 / 2)
    assert got[("PMA q128 fill0.5", "fwd")] == attainment(dict(PMA, floor_fwd_ms=0.1))[
        ("PMA q128 fill0.5", "fwd")]
    # the floor bounds the issue's goal too
    floor = attainment(dict(row, floor_fwd_ms=0.8))[("PMA q128 fill0.5 (issue's varlen)", "fwd")]
    assert floor == pytest.approx(1.25 * 0.8 / 0.4)
    assert not any("issue" in goal for goal, _ in attainment(PMA))


def test_self_rows_need_1_5x_and_the_full_row_is_the_dense_b768_case():
    got = attainment(SELF)
    assert got[("self B768 fill1.0", "fwd")] == pytest.approx(3.0 / 1.5 / 2.0)
    assert got[("self B768 fill1.0", "fwd+bwd")] == pytest.approx(6.0 / 1.5 / 5.0)
    assert got[("dense B768 H4 N1024 vs tutorial", "fwd")] == pytest.approx(1.9 / 0.95 / 2.0)


def test_dense_row_has_only_its_tutorial_goal():
    assert attainment(DENSE) == {("dense B4 H32 N4096 vs tutorial", "fwd"): pytest.approx(1.8 / 0.95 / 2.0)}


def test_paired_rows_take_the_median_of_their_rounds_ratios():
    # --baseline-rounds: baseline/tlx per round, medians in *_per_tlx, not the ratio of the medians
    paired = dict(PMA, varlen_fwd_ms_per_tlx=2.4, varlen_fwdbwd_ms_per_tlx=1.7, floor_fwd_ms=0.1)
    got = attainment(paired)
    assert got[("PMA q128 fill0.5", "fwd")] == pytest.approx(2.4 / 2)  # over 1.25 x floor / tlx
    assert got[("PMA q128 fill0.5", "fwd+bwd")] == pytest.approx(1.7 / 2)
    # the padded floor still bounds the forward goal
    assert attainment(dict(paired, floor_fwd_ms=1.0))[("PMA q128 fill0.5", "fwd")] == pytest.approx(1.25 / 0.5)
    got = attainment(dict(SELF, varlen_fwdbwd_ms_per_tlx=1.53, tutorial_fwd_ms_per_tlx=0.93))
    assert got[("self B768 fill1.0", "fwd+bwd")] == pytest.approx(1.53 / 1.5)
    assert got[("self B768 fill1.0", "fwd")] == pytest.approx(3.0 / 1.5 / 2.0)  # no paired ratio
    assert got[("dense B768 H4 N1024 vs tutorial", "fwd")] == pytest.approx(0.93 / 0.95)


def test_rows_without_a_pass_give_no_entry_for_it():
    assert ("PMA q128 fill0.5", "fwd+bwd") not in attainment({k: v for k, v in PMA.items() if "fwdbwd" not in k})


def test_table_and_plot_from_recorded_runs(tmp_path, capsys):
    runs = []
    for i, scale in enumerate((1.2, 0.9)):  # run 2 is faster: every tlx time x 0.9
        path = tmp_path / f"run{i}.jsonl"
        rows = [{k: (v * scale if k.startswith("tlx") else v) for k, v in r.items()} for r in (PMA, SELF, DENSE)]
        rows.append({"name": "PMA q192 fill0.1", "error": "RuntimeError: out of memory"})
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        runs.append(f"run {i + 1}={path}")
    out = tmp_path / "goals.png"
    assert main([*runs, "--out", str(out), "--mark", "run 2=fair baseline"]) == 0
    assert out.stat().st_size > 0
    with pytest.raises(SystemExit, match=r"--mark 'run 3=x': expected LABEL=NOTE with LABEL one of the runs"):
        main([*runs, "--out", str(out), "--mark", "run 3=x"])
    text = capsys.readouterr().out
    assert "| goal | pass | run 1 | run 2 |" in text
    # PMA forward: 1.25 / 1.2 = 1.042 (met, bold) then 1.25 / 0.9 = 1.389
    assert "| PMA q128 fill0.5 | fwd | **1.042** | **1.389** |" in text
    # dense B4 H32: 0.947 / 1.2 = 0.789 (not met) then 0.947 / 0.9 = 1.053 (met)
    assert "| dense B4 H32 N4096 vs tutorial | fwd | 0.789 | **1.053** |" in text
    assert "PMA q192 fill0.1" not in text  # a row that errored has no timings


def test_bad_run_specs_name_the_problem(tmp_path):
    with pytest.raises(SystemExit, match=r"expected LABEL=PATH\[,PATH...\]"):
        read_run(str(tmp_path / "run.jsonl"))
    with pytest.raises(SystemExit, match="run 'r': no file"):
        read_run(f"r={tmp_path / 'missing.jsonl'}")
    empty = tmp_path / "errors.jsonl"
    empty.write_text(json.dumps({"name": "PMA q192 fill0.1", "error": "boom"}) + "\n")
    with pytest.raises(SystemExit, match="no benchmark row with timings"):
        read_run(f"r={empty}")


def test_a_run_of_several_files_takes_the_median_of_repeated_rows(tmp_path):
    paths = []
    for i, tlx_fwd in enumerate((0.4, 0.5, 1.0)):  # three samples of one row; the median is 0.5
        path = tmp_path / f"ab{i}.jsonl"
        path.write_text(json.dumps(dict(PMA, tlx_fwd_ms=tlx_fwd)) + "\n")
        paths.append(str(path))
    dense = tmp_path / "dense.jsonl"
    dense.write_text(json.dumps(DENSE) + "\n")
    label, goals = read_run("run 12=" + ",".join([*paths, str(dense)]))
    assert label == "run 12"
    assert goals[("PMA q128 fill0.5", "fwd")] == pytest.approx(0.625 / 0.5)
    assert goals[("dense B4 H32 N4096 vs tutorial", "fwd")] == pytest.approx(1.8 / 0.95 / 2.0)
    with pytest.raises(SystemExit, match="run 'r': no file"):
        read_run(f"r={paths[0]},{tmp_path / 'missing.jsonl'}")


def test_gzipped_records_read_by_either_name(tmp_path):
    """A packed record file is read as PATH.gz or, where PATH itself is gone, as PATH."""
    import gzip

    packed = tmp_path / "bench.jsonl.gz"
    packed.write_bytes(gzip.compress((json.dumps(PMA) + "\n").encode()))
    by_gz = read_run(f"r={packed}")
    by_plain = read_run(f"r={tmp_path / 'bench.jsonl'}")
    assert by_gz == by_plain
    assert by_gz[1][("PMA q128 fill0.5", "fwd")] == pytest.approx(0.625 / PMA["tlx_fwd_ms"])
    with pytest.raises(SystemExit, match="run 'r': no file"):
        read_run(f"r={tmp_path / 'other.jsonl'}")
