# Sourced by run 53's calls b and c (after benchmarks/device_call.sh): call a's chained winner
# flipped into SPLIT_TILE_FIELDS, early_tiles before swap_pairs (they exclude each other).
if [ -n "$(chain_get early_tiles)" ]; then
  flip_split_tile_field early_tiles True
elif [ -n "$(chain_get swap_pairs)" ]; then
  flip_split_tile_field swap_pairs True
fi
