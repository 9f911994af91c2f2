"""Make FwdConfig.balanced_split the split tile's default (session 45's prepared flip).

    python docs/kernels/tlx_hopper_run46/flip_balanced.py

One exact edit of kernels/tlx_hopper.py: `SPLIT_TILE_FIELDS`, the fields `with_split_tiles` sets,
gains balanced_split=True. The tests are written for either default (the balanced split's test
flips it from the launcher's choice; head pairs and the ping-pong comparisons turn it off), so the
suite runs unchanged on the flipped tree. Used by next_call_a_script.sh when its A/Bs pass the gate
and by next_call_d_script.sh with FLIP_BALANCED=1; run it locally to merge the flip (then record
the run in docs/kernels/tlx_hopper.md and the FwdConfig comment). Exits 1, changing nothing, when
the line is not there exactly once.
"""

import sys
from pathlib import Path

PATH = Path(__file__).resolve().parents[3] / "kernels" / "tlx_hopper.py"
OLD = 'SPLIT_TILE_FIELDS = types.MappingProxyType({"split_tiles": True, "late_p_cast": False})\n'
NEW = ('SPLIT_TILE_FIELDS = types.MappingProxyType({"split_tiles": True, "late_p_cast": False,\n'
       '                                           "balanced_split": True})\n')



def flipped(text: str) -> str:
    """text (kernels/tlx_hopper.py's) with the flip; ValueError unless OLD is there exactly once."""
    if text.count(OLD) != 1:
        raise ValueError(f"SPLIT_TILE_FIELDS is not as prepared (found {text.count(OLD)} times)")
    return text.replace(OLD, NEW)


def main() -> int:
    try:
        PATH.write_text(flipped(PATH.read_text()))
    except ValueError as exc:
        print(f"flip_balanced: {PATH}: {exc}; nothing changed", file=sys.stderr)
        return 1
    print(f"flip_balanced: {PATH}: SPLIT_TILE_FIELDS now sets balanced_split=True")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
