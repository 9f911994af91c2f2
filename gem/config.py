"""Typed config sections: each component validates its own section against its dataclass."""

from __future__ import annotations

from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

T = TypeVar("T")


class ConfigError(ValueError):
    """A config section does not match its schema (unknown key, wrong type, bad value)."""


def typed(schema: type[T], section: DictConfig | dict[str, Any] | T, where: str) -> T:
    """Return `section` as an instance of the dataclass `schema`, or raise ConfigError.

    Unknown keys and values of the wrong type are rejected here, before anything is built, with
    the section name (`where`, e.g. "trainer") in the message.
    """
    if isinstance(section, schema):
        return section
    try:
        if isinstance(section, DictConfig):  # resolve first: interpolations may point outside the section
            section = OmegaConf.to_container(section, resolve=True)
        merged = OmegaConf.merge(OmegaConf.structured(schema), section)
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except OmegaConfBaseException as err:
        raise ConfigError(f"invalid `{where}` config: {err}".replace("\n", "; ")) from None


def launch_time() -> str:
    """Timestamp of this launch, identical on every rank of a node.

    Under torchrun every worker is a child of the same agent, so the agent's start time names one
    run directory for all of them (each worker calling `now` could straddle a second boundary).
    """
    import datetime
    import os

    when = datetime.datetime.now()
    if "LOCAL_RANK" in os.environ:
        try:
            with open(f"/proc/{os.getppid()}/stat") as f:
                start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
            with open("/proc/stat") as f:
                boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
            when = datetime.datetime.fromtimestamp(boot + start_ticks / os.sysconf("SC_CLK_TCK"))
        except (OSError, ValueError, IndexError, StopIteration):
            pass  # not Linux: fall back to this process's clock
    return when.strftime("%Y-%m-%d/%H-%M-%S")


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("launch_time"):
        OmegaConf.register_new_resolver("launch_time", launch_time, use_cache=True)
