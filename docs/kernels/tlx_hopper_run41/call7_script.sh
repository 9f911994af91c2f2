#!/usr/bin/env bash
# Run 41 call 7: the final code (split tiles by default for PMA q128 with short keys): the GPU tests
# of every q128 case (forward, backward, switches, the PMA backward that takes the forward's LSE),
# the split-tile and short-key tests, then full tables while time is left. (tests/kernels in full
# would not fit the session's remaining device time: it ran in call 1 without split tiles.)
# Run: CALL_S=320 bash devrun/call7.sh, carry [".gpu/tools", ".gpu/kernels"]
source benchmarks/device_call.sh
if gpu_tests q128 tests/kernels -k "q128 or split_tiles or short_key"; then
  tables bench41d 2
fi
finish
