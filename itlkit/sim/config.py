"""The engine's knobs, with vLLM's names and itlkit's defaults (a release's: `sim.versions`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from itlkit.errors import ConfigError

# One 400 Gb/s RDMA NIC per GPU, a common prefill-to-decode KV transfer path.
DEFAULT_KV_TRANSFER_BYTES_PER_SECOND = 50e9


# vLLM V0 admits a prompt only if the free KV blocks less the prompt's leave 1 % of all blocks
# free ("Use watermark to avoid frequent cache eviction": `can_allocate` in
# vllm/core/block_manager.py, vllm-project/vllm @9a4b60a4, watermark 0.01); a request just
# preempted waits for that headroom too, which spaces V0's preemptions out.
V0_WATERMARK = 0.01


def admission_watermark(engine: str) -> float:
    """The share of KV blocks an admission leaves free on `engine` ("V0", "V1", "SGLang")."""
    return V0_WATERMARK if engine == "V0" else 0.0


@dataclass(frozen=True)
class SchedulerConfig:
    """The engine's knobs (vLLM names). The defaults are V1 `vllm serve`'s on a GPU of at least
    70 GiB that is not an A100 (vLLM 0.10.1 to 0.27.x); `versions.engine_defaults` gives those
    of a named release on a given GPU."""

    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 1024
    enable_chunked_prefill: bool = True
    disaggregated: bool = False
    prefill_instances: int = 1  # disaggregated: prefill instances feeding the decode instance
    # A step that carries prompt tokens carries nothing else; the decodes wait it out
    # (`Engine.prefill_only`): vLLM V0 without chunked prefill, SGLang without
    # --enable-mixed-chunk (its prompts chunked at the budget: `sim.sglang`)
    prefill_only_steps: bool = False
    # Speculative decoding: each decoding request verifies this many drafts a step and takes
    # 1 + them of the token budget (`sim.speculative`); 0: one token each
    speculative_tokens: int = 0
    kv_transfer_bytes_per_second: float = DEFAULT_KV_TRANSFER_BYTES_PER_SECOND
    # The prefix cache: off, a preempted request finds none of its freed blocks again
    # (`Engine.refind`) and recomputes its whole context
    enable_prefix_caching: bool = True
    # The share of KV blocks an admission must leave free (`V0_WATERMARK`; V1 keeps none)
    admission_watermark: float = 0.0
    # The API server's serial intake in front of the engine, seconds per prompt token
    # (`sim.intake`; an open loop's or a burst's prompts reach the engine one after another)
    intake_seconds_per_prompt_token: float = 0.0
    # vLLM's --async-scheduling (on by default from 0.14): each step is scheduled while the one
    # before it runs, so a request arriving during a step joins the step after next
    # (`Engine.admission_horizon`)
    async_scheduling: bool = False

    def validate(self) -> None:
        """Raise ConfigError for knobs vLLM would reject or that cannot run."""
        for name in ("max_num_batched_tokens", "max_num_seqs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        k = self.speculative_tokens
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0:
            raise ConfigError(f"speculative_tokens must be an integer >= 0, got {k!r}")
        # A decode step of prefill-only steps has no token budget (SGLang's running requests may
        # outnumber its chunk); in mixed steps every running request needs a decode token.
        if self.max_num_seqs > self.max_num_batched_tokens and not self.prefill_only_steps:
            raise ConfigError(
                f"max_num_seqs ({self.max_num_seqs}) must not exceed max_num_batched_tokens "
                f"({self.max_num_batched_tokens}): every running request needs a decode token"
            )
        if self.prefill_only_steps and self.disaggregated:
            raise ConfigError(
                "prefill-only steps are a policy of one instance that prefills and decodes: "
                "not with disaggregated (its decode instance runs no prompts)"
            )
        n = self.prefill_instances
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise ConfigError(f"prefill_instances must be an integer >= 1, got {n!r}")
        rate = self.kv_transfer_bytes_per_second
        if not (rate > 0 and math.isfinite(rate)):
            raise ConfigError(f"kv_transfer_bytes_per_second must be > 0, got {rate}")
        intake = self.intake_seconds_per_prompt_token
        if not (intake >= 0 and math.isfinite(intake)):
            raise ConfigError(f"intake_seconds_per_prompt_token must be >= 0, got {intake}")
