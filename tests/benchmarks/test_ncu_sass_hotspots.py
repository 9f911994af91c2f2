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


ROLES_CSV = '''"Kernel Name","k",
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_long_sb","stall_barrier","stall_no_inst"
"0x10","      S2R R1, SR_TID.X","0","12","0","0","0"
"0x20","      USETMAXREG.DEALLOC.CTAPOOL 0x28","1","12","1","0","0"
"0x30","      SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR4], R2","40","400","38","0","2"
"0x40","      EXIT","0","4","0","0","0"
"0x50","      USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8","2","8","0","1","1"
"0x60","      BAR.SYNC.DEFER_BLOCKING 0x3, 0x80","30","1,600","0","25","5"
"0x70","      FMUL R3, R3, R3","0","0","0","0","0"
'''


def test_roles_sum_samples_per_warp_role(tmp_path):
    from benchmarks.ncu_sass_hotspots import roles

    path = tmp_path / "sass.csv"
    path.write_text(ROLES_CSV)
    lines = roles(read_sass(str(path))).splitlines()
    assert lines[0] == "73 stall samples"
    body = lines[4:]
    # the entry (S2R) and the two roles; "after EXIT" starts the consumer's region at row 4 but
    # the USETMAXREG opens a new one there too: the empty one between is left out
    assert len(body) == 3, body
    assert body[0].startswith("| 0 | `entry` | 1 | 12 | 0 | 0.0% |")
    assert body[1].startswith("| 1 | `USETMAXREG.DEALLOC.CTAPOOL 0x28` | 3 | 416 | 41 | 56.2% | long_sb 39, no_inst 2")
    assert body[2].startswith("| 4 | `USETMAXREG.TRY_ALLOC.CTAPOOL UP0` | 3 | 1,608 | 32 | 43.8% | barrier 26, no_inst 6")


RUNS_CSV = '''"Kernel Name","k",
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed"
"0x10","      S2R R1, SR_TID.X","0","8"
"0x20","      LDG.E R2, desc[UR4][R6.64]","5","16"
"0x30","      R2UR UR7, R2","20","16"
"0x40","      HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT","1","48"
"0x50","      FMNMX R57, R24, R25, !PT","2","48"
"0x60","      MUFU.EX2 R3, R3","3","48"
"0x70","      FMUL R24, R24, R98","0","0"
"0x80","      EXIT","0","8"
'''


def test_runs_give_instructions_per_unit(tmp_path):
    from benchmarks.ncu_sass_hotspots import runs

    path = tmp_path / "sass.csv"
    path.write_text(RUNS_CSV)
    # rows 1-6 of a role whose 8 warps each work through 2 units (16 executions = once per unit)
    lines = runs(read_sass(str(path)), 1, 7, per=16).splitlines()
    assert lines[0] == "rows 1-6: 11 instructions executed per unit, 31 stall samples"
    body = lines[4:]
    # the two-instruction run at 1.00 is listed for its samples (81 %), the three at 3.00 for its
    # length; the never executed FMUL only counts (0 per unit)
    assert body == ["| 1-2 | 2 | 1.00 | 25 | 80.6% | `LDG.E R2, desc[UR4][R6.64]` |",
                    "| 3-5 | 3 | 3.00 | 6 | 19.4% | `HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT` |"], body
