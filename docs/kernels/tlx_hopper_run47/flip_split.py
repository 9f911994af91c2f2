"""Make split-tile fields defaults (an in-call flip after an A/B, or a local merge of one).

    python docs/kernels/tlx_hopper_run47/flip_split.py free_group_split=True [claim_tiles=True ...]

One exact edit of kernels/tlx_hopper.py: `SPLIT_TILE_FIELDS`, the fields `with_split_tiles` sets
(the one place a split-tile default changes), gains the given boolean fields. The split-tile
tests take their configurations from it, so the suite runs unchanged on the flipped tree. Exits 1,
changing nothing, when the line is not as expected or a field is not a FwdConfig boolean.
"""

import re
import sys
from pathlib import Path

PATH = Path(__file__).resolve().parents[3] / "kernels" / "tlx_hopper.py"
LINE = re.compile(r"^SPLIT_TILE_FIELDS = types\.MappingProxyType\(\{(?P<body>[^}]*)\}\)\n", re.M)
# trimmed to the FwdConfig booleans that still exist (balanced_split, free_group_split and
# claim_tiles were removed after run 47's A/Bs)
BOOLEAN_FIELDS = ("shift_tail",)


def flipped(text: str, fields: dict[str, bool]) -> str:
    """text (kernels/tlx_hopper.py's) with `fields` added to SPLIT_TILE_FIELDS; ValueError when the
    line is not there exactly once, or a field is unknown."""
    bad = sorted(set(fields) - set(BOOLEAN_FIELDS))
    if bad:
        raise ValueError(f"fields: expected some of {BOOLEAN_FIELDS}, got {bad}")
    found = LINE.findall(text)
    if len(found) != 1:
        raise ValueError(f"SPLIT_TILE_FIELDS is not one line (found {len(found)})")
    entries = dict(re.findall(r'"(\w+)": (True|False)', found[0]))
    entries.update({k: str(v) for k, v in fields.items()})
    body = ", ".join(f'"{k}": {v}' for k, v in entries.items())
    return LINE.sub(lambda m: f"SPLIT_TILE_FIELDS = types.MappingProxyType({{{body}}})\n", text)


def main(argv: list[str]) -> int:
    try:
        fields = {}
        for arg in argv:
            name, _, value = arg.partition("=")
            if value not in ("True", "False"):
                raise ValueError(f"{arg}: expected FIELD=True or FIELD=False")
            fields[name] = value == "True"
        PATH.write_text(flipped(PATH.read_text(), fields))
    except ValueError as exc:
        print(f"flip_split: {PATH}: {exc}; nothing changed", file=sys.stderr)
        return 1
    print(f"flip_split: {PATH}: SPLIT_TILE_FIELDS now sets {fields}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
