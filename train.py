"""Train a ranking model: `python train.py [overrides]` or `torchrun --nproc_per_node=N train.py ...`.

Everything is decided by the Hydra config in conf/ (see README.md); outputs go to hydra.run.dir.
"""

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from gem.config import register_resolvers
from gem.distributed import shutdown
from gem.trainer import Trainer

register_resolvers()


@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    trainer = Trainer(cfg, Path(HydraConfig.get().runtime.output_dir))
    try:
        trainer.train()
    finally:
        trainer.close()


if __name__ == "__main__":
    main()
    shutdown(0)
