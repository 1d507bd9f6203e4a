"""itlkit: decompose LLM inter-token latency."""
