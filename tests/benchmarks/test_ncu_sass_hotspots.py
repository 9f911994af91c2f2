"""benchmarks.ncu_sass_hotspots on a small export in Nsight Compute's source-page CSV shape."""

from benchmarks.ncu_sass_hotspots import hotspots, read_sass

CSV = '''"Kernel Name","k",
"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","stall_long_sb","stall_barrier","stall_long_sb (Not Issued)"
"0x7f00000000a0","      FMUL R14, R15, 1.4426950216293334961","60","58","57","3","55"
"0x7f00000000b0","  @!P0  BRA 0x7f0000000100","30","30","30","0","30"
"0x7f00000000c0","      BAR.SYNC.DEFER_BLOCKING 0x2, 0x80","10","10","0","10","0"
"0x7f00000000d0","      FMUL R16, R15, R15","1,000","0","0","0","0"
'''


def test_hotspots_rank_instructions_and_sum_by_opcode_and_reason(tmp_path):
    path = tmp_path / "sass.csv"
    path.write_text(CSV)
    rows = read_sass(str(path))
    assert [r["Address"][-2:] for r in rows] == ["a0", "b0", "c0", "d0"]
    table = hotspots(rows, top=2)
    lines = table.splitlines()
    assert lines[0] == "1,100 stall samples over 4 SASS instructions"
    # the two largest, in order, with their shares and leading reasons ("1,000" parsed as 1000)
    assert lines[4].startswith("| 1,000 | 90.9% | 000d0 | `FMUL R16, R15, R15` |")
    assert lines[5].startswith("| 60 | 5.5% | 000a0 | `FMUL R14, R15, 1.4426950216293334961` | long_sb 95%, barrier 5%")
    assert "| BAR.SYNC" not in table                       # beyond --top
    assert "| FMUL | 96.4% |" in table and "| BRA | 2.7% |" in table  # predicates stripped
    assert "| long_sb | 7.9% |" in table and "| barrier | 1.2% |" in table
