"""The worked example's step times, derived here from its stated inputs (not from itlkit's output).

Llama 3.1 8B in BF16 (8,030,261,248 parameters, 131,072 KV bytes per token), 64 sequences at 4,096
tokens of context, one H100 SXM: 3.35 TB/s HBM, 989.4 TFLOP/s dense BF16 (the whitepaper value the
reference rounds to 989) at 50% MFU. A step that carries a chunk runs its GEMMs over chunk + 64
tokens compute-bound and still reads every sequence's KV cache; the reference rounds this to
"~79 ms" at 2,048 tokens and "~29 ms" at 512.
"""

PARAMETERS = 8_030_261_248
KV_BYTES = 64 * 4096 * 131_072  # 34.36 GB
HBM_BYTES_PER_SECOND = 3.35e12
FLOPS_PER_SECOND_AT_HALF_MFU = 0.5 * 989.4e12
DECODES = 64


def mixed_step_ms(chunk_tokens: int) -> float:
    """2 x params x (chunk + decodes) at 50% MFU, plus the decodes' KV read (worked example)."""
    gemm_seconds = 2 * PARAMETERS * (chunk_tokens + DECODES) / FLOPS_PER_SECOND_AT_HALF_MFU
    return (gemm_seconds + KV_BYTES / HBM_BYTES_PER_SECOND) * 1e3


def ms_text(milliseconds: float) -> str:
    """How itlkit prints a duration: two decimals and the unit."""
    return f"{milliseconds:.2f} ms"


# The derived values the tests look for, each checked against the reference's own rounding.
CHUNK_2048_MS = mixed_step_ms(2048)  # 78.82 ms; the reference says ~79 ms
CHUNK_512_MS = mixed_step_ms(512)  # 28.96 ms; the reference says ~29 ms
WHOLE_PROMPT_MS = mixed_step_ms(4096)  # chunked prefill off: the 4,096-token prompt in one step
assert round(CHUNK_2048_MS) == 79 and round(CHUNK_512_MS) == 29
