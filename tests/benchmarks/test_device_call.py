"""benchmarks/device_call.sh, the device calls' shared preamble, run by bash in a scratch tree with
a stub bundle and a `python` whose pytest prints a chosen summary (the rest is this Python)."""

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_call(tmp_path: Path, summary: str, body: str, tools: dict[str, str] | None = None,
             call_s: int = 300, script: str | None = None,
             env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    """tools: more stub commands (name -> sh script) on the call's PATH; call_s: the call's CALL_S;
    script: a whole call script (else body between the preamble and `finish`); env: more variables.
    Calls in one tmp_path share a chain directory, as calls on one warm machine share /tmp
    (`_next_call` clears the rest between them)."""
    tree = tmp_path / "tree"
    (tree / ".gpu/tools").mkdir(parents=True)
    (tree / ".gpu/tools/unpack.sh").write_text("exit 0\n")
    (tree / "benchmarks").mkdir(exist_ok=True)  # a test may have put a stub module there
    shutil.copy(REPO / "benchmarks/device_call.sh", tree / "benchmarks")
    (tree / "kernels").mkdir(exist_ok=True)  # likewise a stub kernel module
    (tree / "kernels/k.py").write_text("x = 1\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(
        f'#!/bin/sh\nif [ "$1 $2" = "-m pytest" ]; then echo \'{summary}\'; exit 0; fi\n'
        f'exec {sys.executable} "$@"\n')
    (bin_dir / "python").chmod(0o755)
    for name, stub in (tools or {}).items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{stub}")
        (bin_dir / name).chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    script = script or f"source benchmarks/device_call.sh\n{body}\nfinish\n"
    res = subprocess.run(["bash", "-c", script], cwd=tree, capture_output=True, text=True,
                         env={"PATH": f"{bin_dir}:/usr/bin:/bin", "OUT": str(out), "CALL_S": str(call_s),
                              "CHAIN_DIR": str(tmp_path / "chain"), **(env or {})})
    return res, out


def assert_logged_in_order(stdout: str, keys: tuple[str, ...]) -> None:
    """Each key appears in a line of stdout, the first such lines in the keys' order."""
    lines = stdout.splitlines()
    order = [next(i for i, line in enumerate(lines) if key in line) for key in keys]
    assert order == sorted(order)


def run_repo_script(tmp_path: Path, path: str, summary: str, call_s: int, modules: dict[str, str],
                    tools: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    """The repository's call script at `path`, run as `run_call` runs one, with stub benchmark
    modules (name -> source) in its tree's benchmarks/."""
    (tmp_path / "tree/benchmarks").mkdir(parents=True, exist_ok=True)
    for name, source in modules.items():
        (tmp_path / "tree/benchmarks" / f"{name}.py").write_text(source)
    return run_call(tmp_path, summary, "", tools=tools, call_s=call_s,
                    script=(REPO / path).read_text())


@pytest.mark.parametrize("summary,gate", [("12 passed in 3.1s", 0), ("1 failed, 11 passed in 3.1s", 1),
                                          ("5 deselected in 0.1s", 1)])
def test_gpu_tests_gates_on_passed_and_none_failed(tmp_path, summary, gate):
    res, out = run_call(tmp_path, summary, 'gpu_tests demo tests/x.py; echo "gate=$?"')
    assert res.returncode == 0, res.stderr
    assert f"gate={gate}" in res.stdout
    assert f"demo tests rc=0 {summary}" in res.stdout
    # finish: everything but the log packed into one archive beside it
    assert sorted(p.name for p in out.iterdir()) == ["call.log", "r.tgz"]
    with tarfile.open(out / "r.tgz") as tar:
        names = {Path(n).name for n in tar.getnames()}
    assert {"tests_demo.txt", "md5.txt", "call.log"} <= names


def test_ratios_rounds_a_field_of_each_row(tmp_path):
    """None for a row without the field (the issue's baseline is timed on the PMA rows only)."""
    body = ("printf '{\"r\": 0.98765}\\n{\"s\": 2}\\n{\"r\": 1.5}\\n' > \"$OUT/a.jsonl\"\n"
            "ratios \"$OUT/a.jsonl\" r")
    res, _ = run_call(tmp_path, "", body)
    assert res.returncode == 0, res.stderr
    assert "[0.988, None, 1.5]" in res.stdout


@pytest.mark.parametrize("limits,want", [
    ("a<=1.0,b<=0.99", "yes"),      # means a 0.99, b 0.98
    ("a<=0.985,b<=0.99", "no"),     # a's mean is over its limit though one of its rows is under
    ("a<=1.0,missing<=2", "no"),    # a row the A/B did not measure never passes
])
def test_ab_gate_compares_each_rows_mean_over_files_with_its_limit(tmp_path, limits, want):
    body = ("printf '{\"name\": \"a\", \"r\": 0.97}\\n{\"name\": \"b\", \"r\": 0.98}\\n' > \"$OUT/1.jsonl\"\n"
            "printf '{\"name\": \"a\", \"r\": 1.01}\\n{\"name\": \"b\", \"r\": 0.98}\\n' > \"$OUT/2.jsonl\"\n"
            f"echo \"gate=$(ab_gate r '{limits}' \"$OUT/1.jsonl\" \"$OUT/2.jsonl\")\"")
    res, _ = run_call(tmp_path, "", body)
    assert res.returncode == 0, res.stderr
    assert f"gate={want}" in res.stdout


def test_flip_default_copies_the_prepared_files_and_records_the_kernels(tmp_path):
    prepared = tmp_path / "tree/devrun/flipped"
    (prepared / "kernels").mkdir(parents=True)
    (prepared / "tests/kernels").mkdir(parents=True)
    (prepared / "kernels/k.py").write_text("x = 2\n")
    (prepared / "tests/kernels/test_k.py").write_text("def test(): pass\n")
    body = "flip_default devrun/flipped\ncat kernels/k.py tests/kernels/test_k.py"
    res, out = run_call(tmp_path, "", body)
    assert res.returncode == 0, res.stderr
    assert "x = 2" in res.stdout and "def test(): pass" in res.stdout
    assert "flipped from devrun/flipped:" in res.stdout
    with tarfile.open(out / "r.tgz") as tar:
        flipped = tar.extractfile("./md5_flipped.txt").read().decode()
        before = tar.extractfile("./md5.txt").read().decode()
    assert "kernels/k.py" in flipped and flipped.split()[0] != before.split()[0]


# ncu: a profile run writes the report named after -o and records its command line; an import
# prints a details page or the SASS samples
NCU_STUB = """for a in "$@"; do
  if [ "$prev" = -o ]; then echo "$*" > "$a.args"; touch "$a.ncu-rep"; exit 0; fi
  prev=$a
done
case "$*" in
  *details*) printf '    Duration   us   965.6\\n    DRAM Throughput   %%   67.6\\n' ;;
  *source*) echo '"Address","Source"' ;;
esac
"""


def test_ncu_by_role_profiles_one_launch_and_keeps_its_pages(tmp_path):
    body = 'ncu_by_role bwd_x "jfa_bwd_pma_kernel" "PMA q128 fill0.9" --bwd-config pma_dk_early=False'
    res, out = run_call(tmp_path, "", body, tools={"ncu": NCU_STUB})
    assert res.returncode == 0, res.stderr
    assert "ncu bwd_x rc=0 Duration us 965.6 DRAM Throughput % 67.6" in " ".join(res.stdout.split())
    with tarfile.open(out / "r.tgz") as tar:
        names = {Path(n).name for n in tar.getnames()}
        args = tar.extractfile("./bwd_x.args").read().decode()
    assert {"details_bwd_x.txt", "sass_bwd_x.csv.gz", "byrole_bwd_x.md", "ncu_bwd_x.log"} <= names
    assert "bwd_x.ncu-rep" not in names  # the report itself does not come back
    assert "--clock-control none --kernel-name regex:jfa_bwd_pma_kernel --launch-count 1" in args
    assert args.endswith("-m benchmarks.tlx_ncu_probe --shape PMA q128 fill0.9 "
                         "--bwd-config pma_dk_early=False\n")


FAKE_BENCH = """import argparse, json
ap = argparse.ArgumentParser()
ap.add_argument("--bwd", action="store_true")
ap.add_argument("--baseline-rounds")
ap.add_argument("--out")
args = ap.parse_args()
with open(args.out, "w") as f:
    f.write(json.dumps({"varlen_fwdbwd_ms_per_tlx": 2.0412, "varlen_fwd_ms_per_tlx": 1.5}) + "\\n")
"""


@pytest.mark.parametrize("call_s,ran", [(300, 2), (50, 0)])
def test_tables_run_the_full_table_n_times_while_time_is_left(tmp_path, call_s, ran):
    fake = tmp_path / "tree/benchmarks/tlx_hopper_bench.py"
    fake.parent.mkdir(parents=True)
    fake.write_text(FAKE_BENCH)
    res, out = run_call(tmp_path, "", "tables t 2", call_s=call_s)
    assert res.returncode == 0, res.stderr
    if not ran:  # 60 s or less left: no table is started
        assert "table t" not in res.stdout
        return
    assert "table t 1 rc=0 fb [2.041] fwd [1.5]" in res.stdout
    assert "table t 2 rc=0 fb [2.041] fwd [1.5]" in res.stdout
    assert "table t 3" not in res.stdout
    with tarfile.open(out / "r.tgz") as tar:
        names = {Path(n).name for n in tar.getnames()}
    assert {"t_1.jsonl", "t_1.log", "t_2.jsonl", "t_2.log"} <= names


@pytest.mark.parametrize("ab_timeout,rc", [("", 0), ("1", 124)])
def test_ab_run_stops_at_its_own_timeout_when_given_one(tmp_path, ab_timeout, rc):
    """ab_run's A/B runs until 10 s before the deadline, or for AB_TIMEOUT seconds when set (a call
    keeping time for the steps after it)."""
    fake = tmp_path / "tree/benchmarks/tlx_hopper_bench.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("import json, sys, time\ntime.sleep(2)\n"
                    "out = sys.argv[sys.argv.index('--out') + 1]\n"
                    "open(out, 'w').write(json.dumps({'r': 0.97}) + '\\n')\n")
    body = f"AB_TIMEOUT={ab_timeout} ab_run demo r --ab x=1" if ab_timeout else "ab_run demo r --ab x=1"
    res, _ = run_call(tmp_path, "", body)
    assert res.returncode == 0, res.stderr
    assert f"ab demo rc={rc}" in res.stdout
    assert ("[0.97]" in res.stdout) == (rc == 0)


def _next_call(tmp_path: Path) -> None:
    """A later call on the same machine: a fresh copy of the tree and an empty $OUT; the chain stays."""
    for sub in ("tree", "bin", "out"):
        shutil.rmtree(tmp_path / sub, ignore_errors=True)


def test_chain_hands_a_value_to_a_later_call_and_says_when_there_is_none(tmp_path):
    res, _ = run_call(tmp_path, "", 'chain_put flips "a=True b=True"; chain_get none; echo "missing=$?"')
    assert res.returncode == 0, res.stderr
    assert "missing=1" in res.stdout
    _next_call(tmp_path)
    res, _ = run_call(tmp_path, "", 'echo "got=[$(chain_get flips)] rc=$?"')
    assert "got=[a=True b=True] rc=0" in res.stdout


def test_kernels_md5_follows_the_kernels(tmp_path):
    res, _ = run_call(tmp_path, "", 'a=$(kernels_md5); echo "x = 2" > kernels/k.py; b=$(kernels_md5)\n'
                                    'echo "same=$([ "$a" = "$(kernels_md5)" ] && echo 1 || echo 0) len=${#b}"')
    assert res.returncode == 0, res.stderr
    assert "same=0 len=32" in res.stdout


# run 47's chained calls: B and C take call A's flips from the chain; C skips the suite when B's
# passed on the code C runs. A stub flip script edits the stub kernel the way flip_split.py edits
# kernels/tlx_hopper.py.
RUN47 = REPO / "docs/kernels/tlx_hopper_run47"
FLIP_STUB = """import sys
from pathlib import Path
Path("kernels/k.py").write_text("x = 1\\nflips = %r\\n" % sys.argv[1:])
print("flipped", sys.argv[1:])
"""


def _run47_call(tmp_path: Path, name: str, summary: str, env: dict[str, str] | None = None):
    def put_stubs():
        flip = tmp_path / "tree/docs/kernels/tlx_hopper_run47/flip_split.py"
        flip.parent.mkdir(parents=True)
        flip.write_text(FLIP_STUB)
        bench = tmp_path / "tree/benchmarks/tlx_hopper_bench.py"
        bench.parent.mkdir(parents=True)
        bench.write_text(FAKE_BENCH_ANY)
        (tmp_path / "tree/benchmarks/hbm_probe.py").write_text(FAKE_HBM_PROBE)
    _next_call(tmp_path)
    put_stubs()
    return run_call(tmp_path, summary, "", call_s=575, script=(RUN47 / name).read_text(), env=env)


FAKE_BENCH_ANY = """import json, sys
out = sys.argv[sys.argv.index("--out") + 1]
row = {"name": "PMA q128 fill0.1", "varlen_fwdbwd_ms_per_tlx": 2.0, "varlen_fwd_ms_per_tlx": 1.5,
       "tlx_fwd_ab_ratio": 0.97, "tlx_fwd_abcached_ratio": 0.95}
open(out, "w").write(json.dumps(row) + "\\n")
"""


FAKE_HBM_PROBE = """import sys
if "--rows-over-slices" in sys.argv:
    print("PMA q128 fill0.1\\t1.150")
else:
    open(sys.argv[sys.argv.index("--out") + 1], "w").write("| PMA q128 fill0.1 | ... |\\n")
"""


def test_run47_call_c_takes_the_chained_flips_and_skips_the_suite_call_b_passed(tmp_path):
    (tmp_path / "chain").mkdir()
    (tmp_path / "chain/flips").write_text("free_group_split=True")  # as call A leaves it
    res, _ = _run47_call(tmp_path, "next_call_b_script.sh", "900 passed in 200.0s")
    assert res.returncode == 0, res.stderr
    assert 'FLIPS="free_group_split=True"' in res.stdout
    assert "kernels tests rc=0 900 passed" in res.stdout
    res, out = _run47_call(tmp_path, "next_call_c_script.sh", "1 failed in 1.0s")
    assert res.returncode == 0, res.stderr
    assert 'FLIPS="free_group_split=True"' in res.stdout and "TESTED=1" in res.stdout
    assert "table bench47 3 rc=0" in res.stdout
    assert "kernels tests" not in res.stdout  # the suite passed on this very code in call B
    with tarfile.open(out / "r.tgz") as tar:
        flipped = tar.extractfile("./md5_flipped.txt").read().decode()
        before = tar.extractfile("./md5.txt").read().decode()
        names = {Path(n).name for n in tar.getnames()}
    assert flipped != before  # the tables ran on the flipped kernels
    assert {"bench47_1.jsonl", "bench47_3.jsonl"} <= names


@pytest.mark.parametrize("b_summary,c_env", [
    ("1 failed, 899 passed in 200.0s", None),              # call B's suite failed
    ("900 passed in 200.0s", {"FLIPS": "shift_tail=True"}),  # C runs other code than B tested
])
def test_run47_call_c_runs_the_suite_unless_call_b_passed_it_on_the_same_code(tmp_path, b_summary, c_env):
    (tmp_path / "chain").mkdir()
    (tmp_path / "chain/flips").write_text("free_group_split=True")
    res, _ = _run47_call(tmp_path, "next_call_b_script.sh", b_summary)
    assert res.returncode == 0, res.stderr
    res, _ = _run47_call(tmp_path, "next_call_c_script.sh", "900 passed in 200.0s", env=c_env)
    assert res.returncode == 0, res.stderr
    assert "TESTED=0" in res.stdout
    assert "kernels tests rc=0 900 passed" in res.stdout


def test_run47_call_b_without_call_a_on_the_machine_flips_nothing(tmp_path):
    res, out = _run47_call(tmp_path, "next_call_b_script.sh", "900 passed in 200.0s")
    assert res.returncode == 0, res.stderr
    assert "none chained (call A not on this machine): no flips" in res.stdout
    assert 'FLIPS=""' in res.stdout and "flipped" not in res.stdout
    assert "hbm_probe rc=0" in res.stdout and "rows over slices: 1.150" in res.stdout
    assert (tmp_path / "chain/rows_gain").read_text() == "1.150"  # for call C
    with tarfile.open(out / "r.tgz") as tar:
        assert "md5_flipped.txt" not in {Path(n).name for n in tar.getnames()}


def test_run47_call_a_chains_the_flips_its_gates_pass_to_call_b(tmp_path):
    """Every stub A/B reads 0.97 (<= 0.985): both gated split-tile defaults flip in call B."""
    res, _ = _run47_call(tmp_path, "call_a_script.sh", "120 passed in 50.0s")
    assert res.returncode == 0, res.stderr
    assert "gate free: yes" in res.stdout and "gate shift: yes" in res.stdout
    res, _ = _run47_call(tmp_path, "next_call_b_script.sh", "900 passed in 200.0s")
    assert res.returncode == 0, res.stderr
    assert "flipped ['free_group_split=True', 'shift_tail=True']" in (tmp_path / "out/call.log").read_text()


@pytest.mark.parametrize("gain,runs", [("1.150", True), ("1.020", False), (None, False)])
def test_run47_call_c_ab_tests_prefetched_heads_only_where_call_b_found_rows_faster(tmp_path, gain, runs):
    (tmp_path / "chain").mkdir()
    if gain is not None:
        (tmp_path / "chain/rows_gain").write_text(gain)
    res, _ = _run47_call(tmp_path, "next_call_c_script.sh", "900 passed in 200.0s", env={"TESTED": "1"})
    assert res.returncode == 0, res.stderr
    assert f"rows over slices (call B): {gain or 0}" in res.stdout
    assert ("ab prefetch_1 rc=0 [0.97]" in res.stdout) == runs
    assert ("ab prefetch_2 rc=0 [0.97]" in res.stdout) == runs
    assert "table bench47 1 rc=0" in res.stdout


def test_run47_calls_a_b_c_back_to_back_on_one_machine(tmp_path):
    """The three calls in one message: B and C run call A's flips, C times the tables without the
    suite B passed on the same kernels and A/Bs prefetched heads after B's probe found rows
    faster (the stubs' 1.150)."""
    outs = []
    for name in ("call_a_script.sh", "next_call_b_script.sh", "next_call_c_script.sh"):
        res, _ = _run47_call(tmp_path, name, "900 passed in 200.0s")
        assert res.returncode == 0, (name, res.stderr)
        outs.append(res.stdout)
    a, b, c = outs
    assert 'FLIPS="free_group_split=True shift_tail=True"' in a
    assert 'FLIPS="free_group_split=True shift_tail=True"' in b and "kernels tests rc=0" in b
    assert 'FLIPS="free_group_split=True shift_tail=True"' in c and "TESTED=1" in c
    assert "ab prefetch_1 rc=0" in c and "table bench47 3 rc=0" in c and "kernels tests" not in c


def test_run48_call_a_then_run47s_tables_skip_the_suite_it_passed(tmp_path):
    """The next session's two calls back to back: run 48's call A tests the kernels and chains
    their checksum; run 47's call C, issued right after it, flips nothing and times its tables
    without running the suite again. A failed suite chains nothing, so C runs it."""
    script = (REPO / "docs/kernels/tlx_hopper_run48/call_a_script.sh").read_text()
    for summary, tested in (("900 passed in 200.0s", True), ("1 failed, 899 passed in 200.0s", False)):
        shutil.rmtree(tmp_path / "chain", ignore_errors=True)
        _next_call(tmp_path)
        res, _ = run_call(tmp_path, summary, "", call_s=575, script=script)
        assert res.returncode == 0, res.stderr
        assert f"kernels tests rc=0 {summary}" in res.stdout
        res, _ = _run47_call(tmp_path, "next_call_c_script.sh", "900 passed in 200.0s")
        assert res.returncode == 0, res.stderr
        assert 'FLIPS=""' in res.stdout and "flipped" not in res.stdout
        assert f"TESTED={int(tested)}" in res.stdout
        assert ("kernels tests" in res.stdout) != tested


FAKE_PACKED_BOUND = """import json, sys
out = sys.argv[sys.argv.index("--out") + 1]
open(out, "w").write(json.dumps({"name": "PMA q128 fill0.1", "packed_ratio": 0.912}) + "\\n")
"""


@pytest.mark.parametrize("call_s,suite", [(560, True), (300, False)])
def test_run48_one_call_times_a_table_and_the_bound_then_tests_where_330_s_are_left(tmp_path, call_s, suite):
    """The folded call: a table, the packed bound, the suite only with its 390 s still ahead
    (a short call keeps its tables instead), the checksum chained when the suite passed."""
    _next_call(tmp_path)
    res, out = run_repo_script(tmp_path, "docs/kernels/tlx_hopper_run48/call_one_script.sh",
                               "900 passed in 200.0s", call_s,
                               {"tlx_hopper_bench": FAKE_BENCH_ANY,
                                "tlx_packed_bound": FAKE_PACKED_BOUND})
    assert res.returncode == 0, res.stderr
    assert "table bench48 1 rc=0 fb [2.0] fwd [1.5]" in res.stdout
    assert "packed bound rc=0 [0.912]" in res.stdout
    assert ("kernels tests rc=0 900 passed" in res.stdout) == suite
    assert (tmp_path / "chain/tested_md5").exists() == suite
    assert "table bench48b 1 rc=0" in res.stdout
    with tarfile.open(out / "r.tgz") as tar:
        names = {Path(n).name for n in tar.getnames()}
    assert {"bench48_1.jsonl", "packed_bound.jsonl", "bench48b_1.jsonl"} <= names


FAKE_TIMELINE = """import sys
open(sys.argv[sys.argv.index("--out") + 1], "w").write("## tlx forward timeline: stub\\n")
"""
BENCH_AND_TIMELINE = {"tlx_hopper_bench": FAKE_BENCH_ANY, "tlx_timeline": FAKE_TIMELINE}


@pytest.mark.parametrize("summary,recorded", [("12 passed in 9.0s", True),
                                              ("1 failed, 11 passed in 9.0s", False)])
def test_run49_call_records_the_timeline_only_after_its_gpu_tests_pass(tmp_path, summary, recorded):
    """Run 49's call: the ring-turn stamps' GPU tests, the timeline only when they pass, then tables."""
    res, out = run_repo_script(tmp_path, "docs/kernels/tlx_hopper_run49/call_a_script.sh", summary,
                               400, BENCH_AND_TIMELINE)
    assert res.returncode == 0, res.stderr
    assert f"timeline tests rc=0 {summary}" in res.stdout
    assert ("timeline rc=0 ## tlx forward timeline: stub" in res.stdout) == recorded
    for regime in ("none", "clean"):
        assert (f"timeline {regime} rc=0" in res.stdout) == recorded
    assert "table bench49 4 rc=0" in res.stdout


@pytest.mark.parametrize("summary,recorded", [("3 passed in 9.0s", True),
                                              ("1 failed, 2 passed in 9.0s", False)])
def test_run49_call_b_records_the_epilogue_phases_only_after_the_gpu_tests_pass(tmp_path, summary,
                                                                                recorded):
    """Run 49's call b: the epilogue stamps' GPU tests, the timelines only when they pass, tables."""
    res, out = run_repo_script(tmp_path, "docs/kernels/tlx_hopper_run49/call_b_script.sh", summary,
                               300, BENCH_AND_TIMELINE)
    assert res.returncode == 0, res.stderr
    assert f"timeline tests rc=0 {summary}" in res.stdout
    for regime in ("dirty", "clean"):
        assert (f"timeline {regime} rc=0 ## tlx forward timeline: stub" in res.stdout) == recorded
    assert "table bench49c 3 rc=0" in res.stdout


@pytest.mark.parametrize("summary,recorded", [("30 passed in 90.0s", True),
                                              ("1 failed, 29 passed in 90.0s", False)])
def test_run50_call_tests_its_candidates_before_their_abs(tmp_path, summary, recorded):
    """Run 50's call: warm_first's and merge_tail's GPU tests; their A/Bs, warm_first's timeline
    and the SASS samples only when the tests pass; then tables."""
    res, out = run_repo_script(tmp_path, "docs/kernels/tlx_hopper_run50/call_a_script.sh", summary,
                               560, BENCH_AND_TIMELINE, tools={"ncu": NCU_STUB})
    assert res.returncode == 0, res.stderr
    assert f"warm tests rc=0 {summary}" in res.stdout
    for i in (1, 2):
        assert (f"ab warm_{i} rc=0" in res.stdout) == recorded
        assert (f"ab merge_{i} rc=0" in res.stdout) == recorded
    assert ("timeline warm rc=0 ## tlx forward timeline: stub" in res.stdout) == recorded
    for name in ("default", "warm", "merge"):
        assert (f"ncu {name}_q128_fill01 rc=0" in res.stdout) == recorded
    assert "table bench50 3 rc=0" in res.stdout


def test_run50_call_b_runs_the_suite_between_tables_then_the_ring_depth_probes(tmp_path):
    """Run 50's second call: a table, `tests/kernels` in full, the four- and six-stage timelines
    and A/Bs of the q128 fill-0.1 forward, then tables."""
    res, out = run_repo_script(tmp_path, "docs/kernels/tlx_hopper_run50/call_b_script.sh",
                               "900 passed in 200.0s", 560, BENCH_AND_TIMELINE)
    assert res.returncode == 0, res.stderr
    assert_logged_in_order(res.stdout, (
        "table bench50b 1 rc=0", "kernels tests rc=0 900 passed", "timeline nbuf4 rc=0",
        "ab nbuf4 rc=0", "timeline nbuf6 rc=0", "ab nbuf6 rc=0", "table bench50c 3 rc=0"))


@pytest.mark.parametrize("summary,recorded", [("40 passed in 60.0s", True),
                                              ("1 failed, 39 passed in 60.0s", False)])
def test_run51_call_runs_the_new_switches_probes_only_after_their_tests(tmp_path, summary,
                                                                       recorded):
    """Run 51's call: the three new switches' GPU tests; their timelines and A/Bs only when those
    pass; the four-stage ring's A/Bs either way; then tables."""
    res, _ = run_repo_script(tmp_path, "docs/kernels/tlx_hopper_run51/call_a_script.sh",
                             summary, 580, BENCH_AND_TIMELINE)
    assert res.returncode == 0, res.stderr
    assert f"new tests rc=0 {summary}" in res.stdout
    for name in ("split_first", "branches"):
        assert (f"timeline {name} rc=0" in res.stdout) == recorded
    for name in ("branches_1", "branches_2", "first_branch"):
        assert (f"ab {name} rc=0" in res.stdout) == recorded
    for i in (1, 2):
        assert f"ab nbuf4_{i} rc=0" in res.stdout
    assert "table bench51 3 rc=0" in res.stdout


def test_run51_call_b_tests_the_new_defaults_then_reverse_ab_then_tables(tmp_path):
    """Run 51's second call: the new defaults' tests, the reverse A/Bs (the old defaults as the
    candidates), the default's timeline, then tables."""
    res, _ = run_repo_script(tmp_path, "docs/kernels/tlx_hopper_run51/call_b_script.sh",
                             "60 passed in 60.0s", 560, BENCH_AND_TIMELINE)
    assert res.returncode == 0, res.stderr
    assert_logged_in_order(res.stdout, (
        "defaults tests rc=0 60 passed", "ab old_q128_1 rc=0", "ab nbuf8_1 rc=0",
        "ab old_q192_2 rc=0", "timeline default rc=0", "table bench51b 1 rc=0"))


def test_run51_call_c_tests_the_split_tile_then_reverse_ab_then_tables(tmp_path):
    """Run 51's third call: the split tile's tests, the reverse A/B of its branches, tables."""
    res, _ = run_repo_script(tmp_path, "docs/kernels/tlx_hopper_run51/call_c_script.sh",
                             "24 passed in 30.0s", 290, BENCH_AND_TIMELINE)
    assert res.returncode == 0, res.stderr
    assert_logged_in_order(res.stdout, ("split tests rc=0 24 passed", "ab old_q128_1 rc=0",
                                        "ab old_q128_2 rc=0", "table bench51c 1 rc=0"))


@pytest.mark.parametrize("summary,recorded", [("40 passed in 30.0s", True),
                                              ("1 failed, 39 passed in 30.0s", False)])
def test_run52_call_runs_the_balanced_split_only_after_its_tests(tmp_path, summary, recorded):
    """Run 52's call: the balanced split's tests, the default's timeline either way, the balanced
    split's timeline and A/Bs only when its tests pass, then tables."""
    res, _ = run_repo_script(tmp_path, "docs/kernels/tlx_hopper_run52/call_a_script.sh",
                             summary, 560, BENCH_AND_TIMELINE)
    assert res.returncode == 0, res.stderr
    assert f"balanced tests rc=0 {summary}" in res.stdout
    assert "timeline default rc=0" in res.stdout
    assert ("timeline balanced rc=0" in res.stdout) == recorded
    for i in (1, 2):
        for cost in (1, 2, 3):
            assert (f"ab balanced{cost}_{i} rc=0" in res.stdout) == recorded
    assert "ab branches_pma rc=0" in res.stdout
    assert "table bench52 1 rc=0" in res.stdout
    # the stub's ratio, 0.97 at every cost, passes the 0.99 gate: the first cost is chained
    assert ("balanced best (cost, mean ratio): 1 0.97" in res.stdout) == recorded
    assert (tmp_path / "chain/balanced_cost").exists() == recorded


def _tree_with_split_tile_fields(tmp_path: Path, chained: dict[str, str]) -> Path:
    """A call tree holding the real `kernels/tlx_hopper.py` (the line a call's in-place flip of
    SPLIT_TILE_FIELDS edits) and the chained keys (key -> value) as an earlier call left them;
    returns the tree's copy of the file."""
    for key, value in chained.items():
        (tmp_path / "chain").mkdir(exist_ok=True)
        (tmp_path / f"chain/{key}").write_text(value)
    kernel = tmp_path / "tree/kernels/tlx_hopper.py"
    kernel.parent.mkdir(parents=True)
    shutil.copy(REPO / "kernels/tlx_hopper.py", kernel)
    return kernel


@pytest.mark.parametrize("chained", [None, "2"])
def test_run52_call_b_runs_the_suite_between_tables(tmp_path, chained):
    """Run 52's second call: call a's chained balanced_split cost (if any) flipped into
    SPLIT_TILE_FIELDS, then a table, `tests/kernels` in full, then tables."""
    kernel = _tree_with_split_tile_fields(tmp_path, {"balanced_cost": chained} if chained else {})
    res, _ = run_repo_script(tmp_path, "docs/kernels/tlx_hopper_run52/call_b_script.sh",
                             "990 passed in 280.0s", 560, BENCH_AND_TIMELINE)
    assert res.returncode == 0, res.stderr
    assert_logged_in_order(res.stdout, ("table bench52b 1 rc=0", "kernels tests rc=0 990 passed",
                                        "table bench52c 1 rc=0"))
    flipped = kernel.read_text()
    assert ('"balanced_split": True, "split_tile_cost": 2})' in flipped) == bool(chained)
    assert ("flipped: balanced_split=True, split_tile_cost=2" in res.stdout) == bool(chained)


def _assert_flipped(kernel: Path, stdout: str, flipped: str | None) -> None:
    """The kernels file holds `flipped` (or nothing) appended to SPLIT_TILE_FIELDS, as logged."""
    text = kernel.read_text()
    for field in ("swap_pairs", "early_tiles"):
        assert (f'"first_branch": True, "{field}": True}})' in text) == (field == flipped)
        assert (f"flipped: {field}=True in SPLIT_TILE_FIELDS" in stdout) == (field == flipped)


@pytest.mark.parametrize("summary,measured", [("12 passed in 40.0s", True),
                                              ("1 failed, 11 passed in 40.0s", False)])
@pytest.mark.parametrize("call_s,suite", [(440, False), (900, True)])
def test_run53_short_call_abs_early_tiles_after_their_tests_and_the_suite_where_it_fits(
        tmp_path, summary, measured, call_s, suite):
    """Run 53 on a short budget: early tiles' tests first, their A/Bs only where those passed (the
    stub's 0.97 passes the gate: chained and flipped), the whole suite only with 450 s still
    ahead, then tables."""
    kernel = _tree_with_split_tile_fields(tmp_path, {})
    res, _ = run_repo_script(tmp_path, "docs/kernels/tlx_hopper_run53/call_short_script.sh",
                             summary, call_s, BENCH_AND_TIMELINE)
    assert res.returncode == 0, res.stderr
    assert f"early tests rc=0 {summary}" in res.stdout
    for key in ("ab early_1 rc=0", "ab early_3 rc=0", "early_tiles gate: yes"):
        assert (key in res.stdout) == measured
    assert ("no A/B" in res.stdout) == (not measured)
    assert (tmp_path / "chain/early_tiles").exists() == measured
    _assert_flipped(kernel, res.stdout, "early_tiles" if measured else None)
    assert ("kernels tests rc=0" in res.stdout) == suite
    assert ("suite skipped" in res.stdout) == (not suite)
    assert "table bench53s 1 rc=0" in res.stdout


@pytest.mark.parametrize("summary,measured", [
    ("1000 passed in 226.0s", True),
    ("FAILED tests/kernels/test_tlx_hopper.py::test_dense_fwd[x] - boom\n1 failed, 999 passed", True),
    ("FAILED tests/kernels/test_tlx_hopper.py::test_swap_pairs_changes_no_value[x] - boom\n"
     "1 failed, 999 passed", False),
    ("5 deselected in 0.1s", False)])
def test_run54_call_runs_the_suite_then_swap_pairs_abs_unless_their_tests_failed(
        tmp_path, summary, measured):
    """Run 54: `tests/kernels` in full first, tables, then swap_pairs' A/Bs only where something
    passed and none of its tests failed (the stub's 0.97 passes the gate: chained and flipped)."""
    kernel = _tree_with_split_tile_fields(tmp_path, {})
    res, _ = run_repo_script(tmp_path, "docs/kernels/tlx_hopper_run54/call_script.sh", summary,
                             580, BENCH_AND_TIMELINE)
    assert res.returncode == 0, res.stderr
    assert "kernels tests rc=0" in res.stdout
    for key in ("ab swap_pairs_1 rc=0", "ab swap_pairs_3 rc=0", "swap_pairs gate: yes"):
        assert (key in res.stdout) == measured
    assert ("no A/B" in res.stdout) == (not measured)
    assert (tmp_path / "chain/swap_pairs").exists() == measured
    _assert_flipped(kernel, res.stdout, "swap_pairs" if measured else None)
    assert_logged_in_order(res.stdout, ("kernels tests rc=0", "table bench54 1 rc=0",
                                        "table bench54 2 rc=0", "graph rc=0",
                                        "ab swap_pairs_1" if measured else "no A/B"))


def test_run54_short_call_keeps_its_tables_without_the_suite_or_the_abs(tmp_path):
    """Under 450 s the suite is skipped (said so), and with no suite swap_pairs has no A/B."""
    kernel = _tree_with_split_tile_fields(tmp_path, {})
    res, _ = run_repo_script(tmp_path, "docs/kernels/tlx_hopper_run54/call_script.sh",
                             "1000 passed in 226.0s", 400, BENCH_AND_TIMELINE)
    assert res.returncode == 0, res.stderr
    assert "kernels tests rc=" not in res.stdout
    assert_logged_in_order(res.stdout, ("suite skipped", "table bench54 1 rc=0", "graph rc=0",
                                        "no A/B"))
    _assert_flipped(kernel, res.stdout, None)


def test_flip_split_tile_field_fails_loudly_where_the_line_is_gone(tmp_path):
    """The flip edits nothing and says so (status 1) when SPLIT_TILE_FIELDS' line has changed."""
    kernel = tmp_path / "tree/kernels/tlx_hopper.py"
    kernel.parent.mkdir(parents=True)
    kernel.write_text('SPLIT_TILE_FIELDS = {"split_tiles": True}\n')
    res, _ = run_call(tmp_path, "", 'flip_split_tile_field swap_pairs True; echo "status=$?"')
    assert res.returncode == 0, res.stderr
    assert "flip of swap_pairs failed: SPLIT_TILE_FIELDS not found" in res.stdout
    assert "status=1" in res.stdout
    assert kernel.read_text() == 'SPLIT_TILE_FIELDS = {"split_tiles": True}\n'
