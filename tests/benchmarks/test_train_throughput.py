"""benchmarks.train_throughput: kernel-name categories and the report files (the timing itself
runs on the GPU; `--device cpu --preset tiny` is its smoke run)."""

from pathlib import Path

from benchmarks.train_throughput import Row, _category, main, run_header, write_reports


def test_kernel_names_fall_into_the_step_breakdown_categories() -> None:
    assert _category("split_embedding_codegen_forward_unweighted_kernel") == "embeddings"
    assert _category("void fbgemm_gpu::bounds_check_indices_kernel") == "embeddings"
    assert _category("_jfa_fwd_kernel") == "attention"
    assert _category("jfa_bwd_dkdv_kernel") == "attention"
    assert _category("_jfa_dq_reduce_kernel") == "attention"
    assert _category("_jfa_schedule_kernel") == "attention"
    assert _category("flash::flash_fwd_kernel") == "attention"
    assert _category("sm90_xmma_gemm_bf16bf16_bf16f32") == "rest"


def test_reports_are_written(tmp_path: Path) -> None:
    rows = [Row("tlx", 0.5, "ok", 1000.0, 10.0, 20.0, 30.0, 50.0, 12.0, 100.0, 12.7),
            Row("varlen", 0.5, "error: RuntimeError: boom")]
    write_reports(rows, tmp_path, "test", *run_header(["--fills", "0.5"]))
    md = (tmp_path / "train_throughput_test.md").read_text()
    assert "- command: `python -m benchmarks.train_throughput --fills 0.5`" in md
    assert "| tlx | 0.5 | 1000 |" in md and "error: RuntimeError: boom" in md
    assert (tmp_path / "train_throughput_test.csv").read_text().count("\n") == 3
    assert (tmp_path / "train_throughput_test.png").stat().st_size > 0


def test_merge_combines_runs_in_fill_then_backend_order(tmp_path: Path) -> None:
    write_reports([Row("varlen", 0.9, "ok", 3.0), Row("tlx", 0.9, "ok", 4.0)], tmp_path, "gpu1",
                  "NVIDIA H200", ["- command: `run b`", "- date: d1"])
    write_reports([Row("tlx", 0.1, "ok", 2.0)], tmp_path, "gpu0", "NVIDIA H200", ["- command: `run a`", "- date: d0"])
    main(["--merge", str(tmp_path / "train_throughput_gpu1.csv"), str(tmp_path / "train_throughput_gpu0.csv"),
          "--name", "all", "--out-dir", str(tmp_path)])
    md = (tmp_path / "train_throughput_all.md").read_text()
    assert md.startswith("# GEM training throughput (NVIDIA H200)")
    assert "- command: `run b`" in md and "- command: `run a`" in md
    rows = [line.split("|")[1:3] for line in md.splitlines() if line.startswith("| ") and "backend" not in line]
    assert [(b.strip(), f.strip()) for b, f in rows] == [("tlx", "0.1"), ("tlx", "0.9"), ("varlen", "0.9")]
