"""GEM training stack: trainer, models, sharding, optimizers, metrics, distributed set-up."""

import warnings

# TorchRec 1.6 internals, not actionable by users: its sharded state dicts still use ShardedTensor,
# and it probes the default device of our (gloo or nccl) group through a deprecated path.
warnings.filterwarnings("ignore", message="Please use DTensor instead", category=FutureWarning)
warnings.filterwarnings("ignore", message="Multiple backends are registered with this ProcessGroup")
warnings.filterwarnings("ignore", message="`_get_pg_default_device` will be deprecated")
