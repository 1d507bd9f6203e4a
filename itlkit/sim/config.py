"""The engine's knobs, with vLLM's names and itlkit's defaults (a release's: `sim.versions`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from itlkit.errors import ConfigError

# One 400 Gb/s RDMA NIC per GPU, a common prefill-to-decode KV transfer path.
DEFAULT_KV_TRANSFER_BYTES_PER_SECOND = 50e9


@dataclass(frozen=True)
class SchedulerConfig:
    """The engine's knobs (vLLM names). The defaults are V1 `vllm serve`'s on a GPU of at least
    70 GiB that is not an A100 (vLLM 0.10.1 to 0.27.x); `versions.engine_defaults` gives those
    of a named release on a given GPU."""

    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 1024
    enable_chunked_prefill: bool = True
    disaggregated: bool = False
    # vLLM V0 without chunked prefill: a step that admits prompts runs them alone (the decodes
    # wait), `Engine.prefill_only`
    prefill_only_steps: bool = False
    kv_transfer_bytes_per_second: float = DEFAULT_KV_TRANSFER_BYTES_PER_SECOND

    def validate(self) -> None:
        """Raise ConfigError for knobs vLLM would reject or that cannot run."""
        for name in ("max_num_batched_tokens", "max_num_seqs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if self.max_num_seqs > self.max_num_batched_tokens:
            raise ConfigError(
                f"max_num_seqs ({self.max_num_seqs}) must not exceed max_num_batched_tokens "
                f"({self.max_num_batched_tokens}): every running request needs a decode token"
            )
        if self.prefill_only_steps and (self.enable_chunked_prefill or self.disaggregated):
            raise ConfigError(
                "prefill-only steps are V0's policy without chunked prefill, on one instance: "
                "not with enable_chunked_prefill or disaggregated"
            )
        rate = self.kv_transfer_bytes_per_second
        if not (rate > 0 and math.isfinite(rate)):
            raise ConfigError(f"kv_transfer_bytes_per_second must be > 0, got {rate}")
