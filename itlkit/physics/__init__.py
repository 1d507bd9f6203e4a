"""The physics of one engine step: GPUs, model architectures, and the roofline step time.

- `hardware`: the GPU catalog (`GPUS`, `get_gpu`).
- `model`: a transformer's arithmetic (`Model`, `check_tensor_parallel`).
- `hf_config`: a Hugging Face `config.json` as a `Model` (`model_from_hf_config`).
- `model_catalog`: well-known models by name (`MODELS`, `get_model`).
- `roofline`: the step-time model (`Deployment.create`, `decode_step`, `mixed_step`, `capacity`).
- `explain`: the decomposition as a worked answer (`explain`).

Import the modules themselves (`from itlkit.physics.roofline import decode_step`); this package
imports none of them.
"""

__all__ = ["explain", "hardware", "hf_config", "model", "model_catalog", "roofline"]
