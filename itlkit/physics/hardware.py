"""GPU catalog: dense datasheet peaks, HBM size and bandwidth, interconnect, with sources.

Entries come from `shared/spec/gpus.json`, and the PCIe cards people run vLLM on (RTX 3090,
RTX A6000, L40, A10, RTX 5090), the H100 64 GB, A100 40 GB PCIe, B300, RTX PRO 6000 Blackwell and
AMD MI100, MI210, MI250X and MI355X from `tests/data/gpus.json`, which holds all of them with
sources. Every tensor figure is DENSE (no 2:4 sparsity); GeForce cards carry the FP32-accumulate
rate (half the FP16-accumulate one). A GPU is what the serving engine sees as one device: the
MI250X entry is one of its two dies (GCDs). Capacities are stored as the datasheet's number x 1e9
(an "80 GB" card as 80e9 B), as every entry is. Values are written in SI units as literals: no
arithmetic inside entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from itlkit.units import Precision, lookup


@dataclass(frozen=True)
class Hardware:
    """One accelerator: memory, bandwidth and dense tensor peaks per precision (FLOP/s)."""

    slug: str
    name: str
    vendor: str
    hbm_bytes: float
    hbm_bytes_per_second: float
    peak_flops_per_second: dict[str, float] = field(hash=False)
    interconnect: str
    interconnect_bytes_per_second_bidir: float | None
    pcie_bytes_per_second_bidir: float
    confidence: str
    source: str

    @property
    def link_bytes_per_second(self) -> float:
        """One direction of the GPU's scale-up link (NVLink / Infinity Fabric), else PCIe."""
        bidir = self.interconnect_bytes_per_second_bidir or self.pcie_bytes_per_second_bidir
        return bidir / 2

    @property
    def pcie_bytes_per_second(self) -> float:
        """One direction of the GPU's PCIe link, as its datasheet gives it."""
        return self.pcie_bytes_per_second_bidir / 2


def compute_precision(gpu: Hardware, weights: Precision) -> str:
    """The tensor-core precision a matmul with these weights runs at on this GPU.

    FP8 and INT8 weights run as W8A8 where the GPU has that unit, and FP4 ones (MXFP4 / NVFP4
    checkpoints that quantize the activations too) as W4A4 where it has an FP4 unit: vLLM's
    `QuarkW4A4MXFP4` quantizes the activations and runs AITER's FP4 GEMM on a GPU that
    `supports_mx` (the MI355X), and elsewhere dequantizes both to 16 bits
    (vllm/model_executor/layers/quantization/quark/schemes/quark_w4a4_mxfp4.py @
    vllm-project/vllm 0320f490). Otherwise (and always for int4) the weights are dequantized and
    the matmul runs at BF16, as weight-only kernels (Marlin, AWQ) do.
    """
    if weights.name in gpu.peak_flops_per_second and weights.name != "int4":
        return weights.name
    return "bf16"


def peak_flops_per_second(gpu: Hardware, weights: Precision) -> float:
    """Dense peak FLOP/s for matmuls with these weights on this GPU."""
    return gpu.peak_flops_per_second[compute_precision(gpu, weights)]


def ridge_flops_per_byte(gpu: Hardware, weights: Precision) -> float:
    """Roofline ridge point: peak FLOP/s / HBM bytes/s (989 TFLOP/s / 3.35 TB/s = 295 FLOP/B)."""
    return peak_flops_per_second(gpu, weights) / gpu.hbm_bytes_per_second


def get_gpu(name: str | Hardware) -> Hardware:
    """The catalog GPU called `name` (e.g. 'h100-sxm'); unknown names list the valid ones."""
    if isinstance(name, Hardware):
        return name
    return lookup("GPU", name, GPUS)


GPUS: dict[str, Hardware] = {
    "h100-sxm": Hardware(
        slug="h100-sxm",
        name="NVIDIA H100 SXM5 80GB",
        vendor="NVIDIA",
        hbm_bytes=80e9,
        hbm_bytes_per_second=3.35e12,
        peak_flops_per_second={
            "bf16": 989.4e12,
            "fp16": 989.4e12,
            "fp8": 1978.9e12,
            "int8": 1978.9e12,
        },
        interconnect="NVLink 4 (18 links)",
        interconnect_bytes_per_second_bidir=900e9,
        pcie_bytes_per_second_bidir=128e9,
        confidence="high",
        source=(
            "https://www.nvidia.com/en-us/data-center/h100/ (spec table; '* With sparsity'), as quoted by https://archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html ('Shown with sparsity. Specifications 1/2 lower without sparsity') | https://glennklockwood.com/garden/processors/h100 (dense 'Matrix' column: FP16/BF16 989.4, sparse 1978.9; FP8/INT8 dense 1978.9)"
        ),
    ),
    "h100-pcie": Hardware(
        slug="h100-pcie",
        name="NVIDIA H100 PCIe 80GB",
        vendor="NVIDIA",
        hbm_bytes=80e9,
        hbm_bytes_per_second=2e12,
        peak_flops_per_second={"bf16": 756.5e12, "fp16": 756.5e12, "fp8": 1513e12, "int8": 1513e12},
        interconnect="NVLink bridge (pairs)",
        interconnect_bytes_per_second_bidir=600e9,
        pcie_bytes_per_second_bidir=128e9,
        confidence="high",
        source=(
            "https://www.nvidia.com/en-us/data-center/h100/ (spec table; '* With sparsity'), as quoted by https://archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html ('Shown with sparsity. Specifications 1/2 lower without sparsity') | NVIDIA H100 PCIe product brief PB-11133-001 ('memory bandwidth greater than 2,000 GBps', 350 W), as mirrored at https://manuals.plus/m/56b0c3ef7d0a1c470c0af8f05a0bd1f29a778007472ba941201fbbb185c9bccd"
        ),
    ),
    "h100-nvl": Hardware(
        slug="h100-nvl",
        name="NVIDIA H100 NVL 94GB (per GPU; sold as NVLink-bridged pair)",
        vendor="NVIDIA",
        hbm_bytes=94e9,
        hbm_bytes_per_second=3.9e12,
        peak_flops_per_second={
            "bf16": 835.5e12,
            "fp16": 835.5e12,
            "fp8": 1670.5e12,
            "int8": 1670.5e12,
        },
        interconnect="NVLink bridge",
        interconnect_bytes_per_second_bidir=600e9,
        pcie_bytes_per_second_bidir=128e9,
        confidence="high",
        source=(
            "https://www.nvidia.com/en-us/data-center/h100/ (H100 SXM | H100 NVL columns, '* With sparsity'; BF16 1,671, FP8 3,341, 94 GB, 3.9 TB/s, NVLink 600 GB/s, 350-400 W) as quoted in several public repos | https://grokipedia.com/page/210100120 (94 GB HBM3, 6016-bit, ~3.93 TB/s)"
        ),
    ),
    "h200-sxm": Hardware(
        slug="h200-sxm",
        name="NVIDIA H200 SXM 141GB",
        vendor="NVIDIA",
        hbm_bytes=141e9,
        hbm_bytes_per_second=4.8e12,
        peak_flops_per_second={
            "bf16": 989.4e12,
            "fp16": 989.4e12,
            "fp8": 1978.9e12,
            "int8": 1978.9e12,
        },
        interconnect="NVLink 4 (18 links)",
        interconnect_bytes_per_second_bidir=900e9,
        pcie_bytes_per_second_bidir=128e9,
        confidence="high",
        source=(
            "https://www.nvidia.com/en-us/data-center/h200/ as quoted by https://lzwjava.github.io/nvidia-h200-gpu-specs-en ('FP8 3,958 TFLOPS* ... *Performance figures include sparsity'; 141 GB, 4.8 TB/s, NVLink 900 GB/s) | MLPerf Inference v4.1 system description H200-SXM-141GBx8 (141 GB HBM3e, 18x 4th Gen NVLink 900GB/s)"
        ),
    ),
    "h800-sxm": Hardware(
        slug="h800-sxm",
        name="NVIDIA H800 SXM5 80GB (China-market H100 variant; extra entry for the DeepSeek row)",
        vendor="NVIDIA",
        hbm_bytes=80e9,
        hbm_bytes_per_second=3.35e12,
        peak_flops_per_second={
            "bf16": 989.4e12,
            "fp16": 989.4e12,
            "fp8": 1978.9e12,
            "int8": 1978.9e12,
        },
        interconnect="NVLink 4 (reduced)",
        interconnect_bytes_per_second_bidir=400e9,
        pcie_bytes_per_second_bidir=128e9,
        confidence="medium",
        source=(
            "https://github.com/roshini0108/InferSim/blob/main/hardware/gpu.py (h800: fp16 989, fp8 1979, 80 GB, NVLink 400 GB/s)"
        ),
    ),
    "h20": Hardware(
        slug="h20",
        name="NVIDIA H20 96GB (China-market Hopper)",
        vendor="NVIDIA",
        hbm_bytes=96e9,
        hbm_bytes_per_second=4e12,
        peak_flops_per_second={"bf16": 148e12, "fp16": 148e12, "fp8": 296e12, "int8": 296e12},
        interconnect="NVLink 4",
        interconnect_bytes_per_second_bidir=900e9,
        pcie_bytes_per_second_bidir=128e9,
        confidence="medium",
        source=(
            "https://zangshuxian.com/new/674733024499207168 ('H20的FP16稠密算力为148TFLOPS', INT8 296, 4.0 TB/s, 78 SMs) | https://willitrunai.com/es/gpus/h20-96gb (96 GB HBM3, 4,000 GB/s, 148 TFLOPS FP16, 296 INT8, NVLink 900 GB/s, 400 W) | https://github.com/roshini0108/InferSim/blob/main/hardware/gpu.py (Alibaba InferSim: fp16 148, fp8 296, mem 96 GB)"
        ),
    ),
    "a100-40gb-sxm": Hardware(
        slug="a100-40gb-sxm",
        name="NVIDIA A100 40GB SXM4",
        vendor="NVIDIA",
        hbm_bytes=40e9,
        hbm_bytes_per_second=1.555e12,
        peak_flops_per_second={"bf16": 312e12, "fp16": 312e12, "int8": 624e12},
        interconnect="NVLink 3 (12 links)",
        interconnect_bytes_per_second_bidir=600e9,
        pcie_bytes_per_second_bidir=64e9,
        confidence="high",
        source=(
            "https://glennklockwood.com/garden/processors/A100 (cites nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf: FP16/BF16 312 dense / 624 sparse, INT8 624/1248, 1.555 TB/s, 300+300 GB/s NVLink)"
        ),
    ),
    "a100-80gb-sxm": Hardware(
        slug="a100-80gb-sxm",
        name="NVIDIA A100 80GB SXM4",
        vendor="NVIDIA",
        hbm_bytes=80e9,
        hbm_bytes_per_second=2.039e12,
        peak_flops_per_second={"bf16": 312e12, "fp16": 312e12, "int8": 624e12},
        interconnect="NVLink 3 (12 links)",
        interconnect_bytes_per_second_bidir=600e9,
        pcie_bytes_per_second_bidir=64e9,
        confidence="high",
        source=(
            "https://glennklockwood.com/garden/processors/A100 (80 GB HBM2e, 2.039 TB/s; FLOPS same as 40GB) | NVIDIA A100 datasheet nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
        ),
    ),
    "a100-80gb-pcie": Hardware(
        slug="a100-80gb-pcie",
        name="NVIDIA A100 80GB PCIe",
        vendor="NVIDIA",
        hbm_bytes=80e9,
        hbm_bytes_per_second=1.935e12,
        peak_flops_per_second={"bf16": 312e12, "fp16": 312e12, "int8": 624e12},
        interconnect="NVLink bridge (pairs, 3 bridges)",
        interconnect_bytes_per_second_bidir=600e9,
        pcie_bytes_per_second_bidir=64e9,
        confidence="high",
        source=(
            "NVIDIA A100 datasheet nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (A100 80GB PCIe column: 1,935 GB/s, 300 W, NVLink bridge for 2 GPUs 600 GB/s; PDF not retrieved, values as widely quoted) | https://xynio.com/nvidia-a100-tensor-core-gpu/ (datasheet text: 'NVLink Bridge for up to 2 GPUs')"
        ),
    ),
    "l40s": Hardware(
        slug="l40s",
        name="NVIDIA L40S 48GB",
        vendor="NVIDIA",
        hbm_bytes=48e9,
        hbm_bytes_per_second=0.864e12,
        peak_flops_per_second={"bf16": 362.05e12, "fp16": 362.05e12, "fp8": 733e12, "int8": 733e12},
        interconnect="none (PCIe only)",
        interconnect_bytes_per_second_bidir=None,
        pcie_bytes_per_second_bidir=64e9,
        confidence="high",
        source=(
            "NVIDIA L40S datasheet, as reproduced at https://www.mullet.se/product.html?product_id=355414 (BF16 362.05 | 733*, FP8 733 | 1,466*, '* With Sparsity') | https://hmc-tech.com/gpu/nvidia-l40s-vs-nvidia-t40"
        ),
    ),
    "l4": Hardware(
        slug="l4",
        name="NVIDIA L4 24GB",
        vendor="NVIDIA",
        hbm_bytes=24e9,
        hbm_bytes_per_second=0.3e12,
        peak_flops_per_second={"bf16": 121e12, "fp16": 121e12, "fp8": 242.5e12, "int8": 242.5e12},
        interconnect="none (PCIe only)",
        interconnect_bytes_per_second_bidir=None,
        pcie_bytes_per_second_bidir=64e9,
        confidence="high",
        source=(
            "https://grokipedia.com/page/NVIDIA_L4_vs_L40S (datasheet: 242 TFLOPS FP16 with sparsity, 485 TFLOPS FP8/INT8 with sparsity, 24 GB, 300 GB/s, 72 W) | https://store.sourcecode.com/en-us/bg-bucket-compare/125/9820 (INT8 485 TOPS | Sparsity; TF32 120 | Sparsity; 300 GB/s)"
        ),
    ),
    "a10g": Hardware(
        slug="a10g",
        name="NVIDIA A10G 24GB (AWS G5 variant of A10)",
        vendor="NVIDIA",
        hbm_bytes=24e9,
        hbm_bytes_per_second=0.6e12,
        peak_flops_per_second={"bf16": 70e12, "fp16": 70e12},
        interconnect="none (PCIe only)",
        interconnect_bytes_per_second_bidir=None,
        pcie_bytes_per_second_bidir=64e9,
        confidence="low",
        source=(
            "https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/ (same 24 GB / 600 GB/s as A10; 'A10 prioritizes tensor compute, A10G has higher CUDA-core performance'; table values not visible in the stored copy) | https://gist.github.com/shashankprasanna/10ebe6dc1ba1d8d93db17da4e2cc890e (AWS G5: A10G 24 GB, 300 W from nvidia-smi)"
        ),
    ),
    "b200": Hardware(
        slug="b200",
        name="NVIDIA B200 (HGX B200, per GPU, 1000 W)",
        vendor="NVIDIA",
        hbm_bytes=180e9,
        hbm_bytes_per_second=7.7e12,
        peak_flops_per_second={
            "bf16": 2250e12,
            "fp16": 2250e12,
            "fp8": 4500e12,
            "int8": 4500e12,
            "fp4": 9000e12,
        },
        interconnect="NVLink 5 (18 links)",
        interconnect_bytes_per_second_bidir=1800e9,
        pcie_bytes_per_second_bidir=128e9,
        confidence="high",
        source=(
            "NVIDIA GB200 NVL72 / HGX B200 datasheet table as reproduced at https://zdszero.github.io/Computer/Artificial_Intelligence/Hardware.html (HGX B200 per GPU: FP8 9 PF, FP16/BF16 4.5 PF, INT8 9 POPS, 180 GB HBM3E, 7.7 TB/s, NVLink 1.8 TB/s; footnote = with sparsity) | https://glennklockwood.com/garden/processors/B200 (HGX B200 @1000 W dense BF16 2250, FP8 4500, FP4 9000) | https://verda.com/blog/gb300-nvl72-architecture (B200 dense: FP8 4.5 PF, BF16 2.25 PF, INT8 4.5 POPS, 180 GB, 7.7 TB/s)"
        ),
    ),
    "gb200-gpu": Hardware(
        slug="gb200-gpu",
        name="NVIDIA GB200 (per Blackwell GPU in GB200 NVL72, up to 1200 W)",
        vendor="NVIDIA",
        hbm_bytes=186e9,
        hbm_bytes_per_second=8e12,
        peak_flops_per_second={
            "bf16": 2500e12,
            "fp16": 2500e12,
            "fp8": 5000e12,
            "int8": 5000e12,
            "fp4": 10000e12,
        },
        interconnect="NVLink 5 (NVL72 switch fabric)",
        interconnect_bytes_per_second_bidir=1800e9,
        pcie_bytes_per_second_bidir=128e9,
        confidence="high",
        source=(
            "NVIDIA GB200 NVL72 datasheet table as reproduced at https://zdszero.github.io/Computer/Artificial_Intelligence/Hardware.html (per GPU: FP8 10 PF, FP16/BF16 5 PF, INT8 10 POPS, 186 GB HBM3E, 8 TB/s; rack 720 PF FP8, 576 TB/s, 130 TB/s NVLink) | https://glennklockwood.com/garden/processors/B200 (GB200 variant @1200 W: dense BF16 2500, FP8 5000, FP4 10000)"
        ),
    ),
    "mi300x": Hardware(
        slug="mi300x",
        name="AMD Instinct MI300X 192GB",
        vendor="AMD",
        hbm_bytes=192e9,
        hbm_bytes_per_second=5.3e12,
        peak_flops_per_second={
            "bf16": 1307.4e12,
            "fp16": 1307.4e12,
            "fp8": 2614.9e12,
            "int8": 2614.9e12,
        },
        interconnect="Infinity Fabric (7 x 128 GB/s links)",
        interconnect_bytes_per_second_bidir=896e9,
        pcie_bytes_per_second_bidir=128e9,
        confidence="high",
        source=(
            "AMD Instinct MI300X data sheet values (amd.com page itself not retrieved): peak FP16/BF16 1307.4 TFLOPS dense, FP8 2614.9 dense (5229.8 with sparsity), 192 GB HBM3, 5.3 TB/s, 7 IF links x 128 GB/s; the same 1307.4/2614.9/163.4 (FP32) peaks are hard-coded in public roofline tools | https://www.jaredwatkins.com/research/ai-accelerators/amd-instinct/mi300-series/ (~1.3 PF FP16, ~2.6 PF FP8, 5.3 TB/s) | https://gpu.blog/gpus/instinct-mi300x-mi300x (Infinity Fabric 896 GB/s)"
        ),
    ),
    "mi325x": Hardware(
        slug="mi325x",
        name="AMD Instinct MI325X 256GB",
        vendor="AMD",
        hbm_bytes=256e9,
        hbm_bytes_per_second=6e12,
        peak_flops_per_second={
            "bf16": 1307.4e12,
            "fp16": 1307.4e12,
            "fp8": 2614.9e12,
            "int8": 2614.9e12,
        },
        interconnect="Infinity Fabric (7 x 128 GB/s links)",
        interconnect_bytes_per_second_bidir=896e9,
        pcie_bytes_per_second_bidir=128e9,
        confidence="high",
        source=(
            "https://awesomeagents.ai/hardware/amd-mi325x (datasheet values: 256 GB HBM3e, 6 TB/s, FP8 2,614.9, FP8 sparse 5,229.8, FP16/BF16 1,307.4) | https://www.slicast.com/article/1w7kkwv (same compute as MI300X: 2.6 PF FP8, 1.3 PF FP16; 256 GB, 6 TB/s) | https://wiaix.com/amd-instincttm-mi325x-accelerators (seven Infinity Fabric links)"
        ),
    ),
    "rtx-4090": Hardware(
        slug="rtx-4090",
        name="NVIDIA GeForce RTX 4090 24GB",
        vendor="NVIDIA",
        hbm_bytes=24e9,
        hbm_bytes_per_second=1.008e12,
        peak_flops_per_second={
            "bf16": 165.2e12,
            "fp16": 165.2e12,
            "fp8": 330.3e12,
            "int8": 660.6e12,
        },
        interconnect="none (no NVLink)",
        interconnect_bytes_per_second_bidir=None,
        pcie_bytes_per_second_bidir=64e9,
        confidence="high",
        source=(
            "NVIDIA Ada Lovelace architecture whitepaper, Appendix (RTX 4090) [PDF not retrieved here; values cross-checked on the two pages below]: FP16 tensor w/ FP16 acc 330.3 dense, w/ FP32 acc 165.2 dense; BF16 (FP32 acc) 165.2; FP8 660.6 (FP16 acc) / 330.3 (FP32 acc) dense; INT8 660.6 dense | https://waredb.com/processor/nvidia-geforce-rtx-4090 (BF16 165.15 dense / 330.30 sparse; FP8 330.30 / 660.60; INT8 660.60 / 1321.21; 1008 GB/s) | https://gigagpu.com/?p=34220 (BF16/FP16 FP32-acc 165.2 dense; FP16 FP16-acc 330.3)"
        ),
    ),
    "rtx-3090": Hardware(
        slug="rtx-3090",
        name="NVIDIA GeForce RTX 3090 24GB",
        vendor="NVIDIA",
        hbm_bytes=24e9,
        hbm_bytes_per_second=0.936e12,
        peak_flops_per_second={"bf16": 71e12, "fp16": 71e12, "int8": 284e12},
        interconnect="none modeled (PCIe; an optional 2-way NVLink bridge, 112.5 GB/s, pairs only)",
        interconnect_bytes_per_second_bidir=None,
        pcie_bytes_per_second_bidir=64e9,
        confidence="medium",
        source=(
            "NVIDIA Ampere GA102 GPU Architecture whitepaper v2.0, Appendix A 'GeForce RTX 3090' (Peak FP16 Tensor TFLOPS with FP16 Accumulate 142/284, with FP32 Accumulate 71/142, BF16 71/142, TF32 35.6/71, INT8 284/568 TOPS, dense/sparse; 936 GB/s), copy at https://docslib.org/doc/759549/nvidia-ampere-ga102-gpu-architecture-whitepaper [table not shown in the stored excerpt; values as widely quoted] | https://holynerdvana.blogspot.com/2022/10/nvidia-geforce-rtx-3090-specifications.html (24 GB GDDR6X, 936 GB/s, FP16 tensor 142 (285 sparse) = the FP16-accumulate rate, 350 W)"
        ),
    ),
    "rtx-a6000": Hardware(
        slug="rtx-a6000",
        name="NVIDIA RTX A6000 48GB",
        vendor="NVIDIA",
        hbm_bytes=48e9,
        hbm_bytes_per_second=0.768e12,
        peak_flops_per_second={"bf16": 154.8e12, "fp16": 154.8e12, "int8": 309.7e12},
        interconnect="none modeled (PCIe; a 2-way NVLink bridge, 112.5 GB/s bidir, pairs only)",
        interconnect_bytes_per_second_bidir=None,
        pcie_bytes_per_second_bidir=64e9,
        confidence="high",
        source=(
            "NVIDIA RTX A6000 datasheet ('Tensor Performance 309.7 TFLOPS', with sparsity) and Ampere GA102 whitepaper v2.0 Appendix C (FP16/BF16 with FP32 accumulate 154.8 dense / 309.7 sparse; INT8 309.7 / 619.4) | https://llmperf.net/categories/gpu/Nvidia-A6000-GPUs (FP16/BF16 154.8 TFLOPS dense, ~309.7 with sparsity; INT8 309.7 TOPS; 768 GB/s; PCIe 4.0 x16) | https://servethehome.com/nvidia-rtx-a6000-48gb-gpu-drops-quadro-designation (48 GB GDDR6 ECC, 768 GB/s, 300 W, NVLink 2-way 112.5 GB/s bidirectional)"
        ),
    ),
    "l40": Hardware(
        slug="l40",
        name="NVIDIA L40 48GB",
        vendor="NVIDIA",
        hbm_bytes=48e9,
        hbm_bytes_per_second=0.864e12,
        peak_flops_per_second={"bf16": 181.05e12, "fp16": 181.05e12, "fp8": 362e12, "int8": 362e12},
        interconnect="none (PCIe only)",
        interconnect_bytes_per_second_bidir=None,
        pcie_bytes_per_second_bidir=64e9,
        confidence="high",
        source=(
            "NVIDIA L40 datasheet, as reproduced at https://www.mullet.se/product.html?product_id=355414 (L40 column: BF16 181.05 | 362.1*, FP16 181.05 | 362.1*, FP8 362 | 724*, INT8 362 | 724*, 48 GB GDDR6 ECC, 864 GB/s, PCIe Gen4 x16 64 GB/s, 300 W; '* With Sparsity') | https://hmc-tech.com/gpu/nvidia-l40-vs-nvidia-a40 (FP8 724 sparse, FP16/BF16 362 sparse with FP32 accumulate)"
        ),
    ),
    "a10": Hardware(
        slug="a10",
        name="NVIDIA A10 24GB",
        vendor="NVIDIA",
        hbm_bytes=24e9,
        hbm_bytes_per_second=0.6e12,
        peak_flops_per_second={"bf16": 125e12, "fp16": 125e12, "int8": 250e12},
        interconnect="none (PCIe only)",
        interconnect_bytes_per_second_bidir=None,
        pcie_bytes_per_second_bidir=64e9,
        confidence="medium",
        source=(
            "https://www.nvidia.com/en-us/data-center/products/a10-gpu/ (datasheet table: FP32 31.2 TF; TF32 62.5 | 125*; BF16 125 | 250*; FP16 125 | 250*; INT8 250 | 500* TOPS; 24 GB GDDR6; 600 GB/s; PCIe Gen4 64 GB/s; 150 W; '* with sparsity') [page not retrieved here; values as widely quoted] | https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/ (24 GB GDDR6, 600 GB/s; 'the A10 prioritizes tensor compute')"
        ),
    ),
    "rtx-5090": Hardware(
        slug="rtx-5090",
        name="NVIDIA GeForce RTX 5090 32GB",
        vendor="NVIDIA",
        hbm_bytes=32e9,
        hbm_bytes_per_second=1.792e12,
        peak_flops_per_second={
            "bf16": 209.5e12,
            "fp16": 209.5e12,
            "fp8": 419e12,
            "int8": 838e12,
            "fp4": 1676e12,
        },
        interconnect="none (no NVLink)",
        interconnect_bytes_per_second_bidir=None,
        pcie_bytes_per_second_bidir=128e9,
        confidence="medium",
        source=(
            "NVIDIA RTX Blackwell GPU Architecture whitepaper, Appendix (GeForce RTX 5090): FP16 tensor with FP16 accumulate 419 dense / 838 sparse, with FP32 accumulate 209.5 / 419; FP8 with FP32 accumulate 419 / 838; INT8 838 / 1676 TOPS; FP4 1676 / 3352 (the '3,352 AI TOPS') [PDF not retrieved here] | https://www.spheron.network/blog/nvidia-rtx-5090-specs/ (32 GB GDDR7, 512-bit, 1,792 GB/s; FP16 tensor 838.4 sparse, FP8 1,676.8 sparse, FP4 3,352 sparse; 575 W; PCIe Gen 5 x16) | https://pocketmags.com/linux-format-magazine/may-2025/articles/nvidia-geforce-rtx-5090 (1,792 GB/s; 838 FP16; 3,352 FP8/4; 575 W)"
        ),
    ),
    "h100-64gb": Hardware(
        slug="h100-64gb",
        name="NVIDIA H100 SXM5 64GB (HBM2e; e.g. MareNostrum 5 ACC)",
        vendor="NVIDIA",
        hbm_bytes=64e9,
        hbm_bytes_per_second=2e12,
        peak_flops_per_second={
            "bf16": 989.4e12,
            "fp16": 989.4e12,
            "fp8": 1978.9e12,
            "int8": 1978.9e12,
        },
        interconnect="NVLink 4 (18 links), assumed as on the H100 SXM5 80GB",
        interconnect_bytes_per_second_bidir=900e9,
        pcie_bytes_per_second_bidir=128e9,
        confidence="low",
        source=(
            "NO VENDOR FIGURE FOR THIS PART'S BANDWIDTH OR PEAKS: NVIDIA publishes no datasheet for the 64 GB H100. That it exists as an SXM5 module: PCI ID 10de:2337 'H100 SXM5 64GB' (pci.ids, as listed in public device tables); its memory: BSC MareNostrum 5 ACC node description 'GPU: 4x NVIDIA Hopper H100 64GB HBM2' (https://www.bsc.es/supportkc/docs/MareNostrum5/overview, as quoted in public repositories; page not retrieved here). Bandwidth FLAGGED: 2 TB/s is the only vendor-stated H100 HBM2e figure, the H100 PCIe 80GB's (product brief PB-11133-001, 'greater than 2,000 GBps', 5 HBM2e stacks, https://manuals.plus/m/56b0c3ef7d0a1c470c0af8f05a0bd1f29a778007472ba941201fbbb185c9bccd); 64 GB is 4 such stacks, so the real figure is likely lower (an upper bound: the floor it gives is never too slow). Peaks FLAGGED: assumed equal to the H100 SXM5 80GB's (same SXM5 module; https://glennklockwood.com/garden/processors/h100 dense BF16 989.4, FP8 1978.9)"
        ),
    ),
    "a100-40gb-pcie": Hardware(
        slug="a100-40gb-pcie",
        name="NVIDIA A100 40GB PCIe",
        vendor="NVIDIA",
        hbm_bytes=40e9,
        hbm_bytes_per_second=1.555e12,
        peak_flops_per_second={"bf16": 312e12, "fp16": 312e12, "int8": 624e12},
        interconnect="NVLink bridge (pairs, 3 bridges)",
        interconnect_bytes_per_second_bidir=600e9,
        pcie_bytes_per_second_bidir=64e9,
        confidence="high",
        source=(
            "https://www.thundercompute.com/blog/nvidia-a100-specs-full-guide (spec table: A100 PCIe 40GB, 40GB HBM2, 1,555 GB/s, 250 W) | https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md (dense TFLOPS table: A100 PCIe BF16/FP16 312, INT8 624, no FP8; 'NVIDIA A100 PCIe and SXM ... have the same TFLOPS', https://www.nvidia.com/en-us/data-center/a100/) | NVIDIA A100 40GB PCIe product brief PB-10137-001_v03, copy at https://docslib.org/doc/3015592/a100-40gb-pcie-product-brief (PCIe Gen4 card, NVLink bridge for 2 GPUs; its NVLink table not shown in the stored excerpt: 600 GB/s as in the A100 datasheet's PCIe column, values as widely quoted)"
        ),
    ),
    "b300": Hardware(
        slug="b300",
        name="NVIDIA B300 (HGX B300 / Blackwell Ultra, per GPU)",
        vendor="NVIDIA",
        hbm_bytes=288e9,
        hbm_bytes_per_second=8e12,
        peak_flops_per_second={
            "bf16": 2250e12,
            "fp16": 2250e12,
            "fp8": 4500e12,
            "int8": 125e12,
            "fp4": 13125e12,
        },
        interconnect="NVLink 5 (18 links)",
        interconnect_bytes_per_second_bidir=1800e9,
        pcie_bytes_per_second_bidir=256e9,
        confidence="medium",
        source=(
            "NVIDIA HGX B300 spec table as reproduced at https://fibermall.com/blog/?p=17161 (8 GPUs, '* With sparsity': FP8/FP6 72 PFLOPS*, INT8 2 POPS*, FP16/BF16 36 PFLOPS*; total memory up to 2.3 TB; NVSwitch GPU-to-GPU 1.8 TB/s; dense per GPU = /8/2: BF16 2,250, FP8 4,500, INT8 125) | https://glennklockwood.com/garden/processors/B300 (HGX B300 dense FP16/BF16 2250, FP8 4500, FP4 13125; 288 GB HBM3e, 8 TB/s max) | https://developer.nvidia.com/blog/inside-nvidia-blackwell-ultra-the-chip-powering-the-ai-factory-era (288 GB HBM3e and 8 TB/s per GPU, NVLink 5 1.8 TB/s) | https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md (B300 SXM dense BF16 2250, FP8 4500, from the DGX B300 datasheet; 288 GB, 8.00 TB/s) | https://www.tomshardware.com/pc-components/gpus/nvidia-shares-blackwell-ultras-secrets-nvfp4-boost-detailed-and-pcie-6-0-support (PCIe 6 at 128 GB/s vs B200's PCIe 5 at 64 GB/s, per direction; INT8 cut)"
        ),
    ),
    "rtx-pro-6000-blackwell": Hardware(
        slug="rtx-pro-6000-blackwell",
        name="NVIDIA RTX PRO 6000 Blackwell 96GB (Workstation / Server Edition, 600 W)",
        vendor="NVIDIA",
        hbm_bytes=96e9,
        hbm_bytes_per_second=1.792e12,
        peak_flops_per_second={
            "bf16": 503.8e12,
            "fp16": 503.8e12,
            "fp8": 1007.6e12,
            "int8": 1007.6e12,
            "fp4": 2015.2e12,
        },
        interconnect="none (PCIe only)",
        interconnect_bytes_per_second_bidir=None,
        pcie_bytes_per_second_bidir=128e9,
        confidence="medium",
        source=(
            "https://hmc-tech.com/gpu/nvidia-rtx-pro-6000-blackwell-vs-amd-radeon-pro-duo-polaris (RTX PRO 6000 Blackwell, 2617 MHz: BF16 503.8 TFLOPS tensor / 1.01 PFLOPS sparse; FP16 503.8 with FP16 and with FP32 accumulate (workstation part: full rate); FP8 1.01 PFLOPS / 2.02 sparse; FP4 2.02 / 4.03 sparse; INT8 1.01 POPS; 96 GB GDDR7; 600 W; the 1.01 and 2.02 printed rounded, entered as 2x and 4x 503.8) | https://gpu.name/posts/nvidia-unveils-rtx-pro-6000-blackwell-gpu-with-24-064-cores-and-96gb-memory (after VideoCardz: 96 GB GDDR7, 512-bit, 1,792 GB/s, 600 W, PCIe Gen 5) | NVIDIA's '4000 AI TOPS' (FP4 with sparsity), as quoted at https://thefilibusterblog.com/de/nvidia-rtx-pro-6000-blackwell-96-gb-gpu-outperforms-32-gb-rtx-5090-by-5-in-pure-path-tracing-benchmark/"
        ),
    ),
    "mi100": Hardware(
        slug="mi100",
        name="AMD Instinct MI100 32GB",
        vendor="AMD",
        hbm_bytes=32e9,
        hbm_bytes_per_second=1.228e12,
        peak_flops_per_second={"bf16": 92.3e12, "fp16": 184.6e12, "int8": 184.6e12},
        interconnect="Infinity Fabric (3 x 92 GB/s links, hives of 4)",
        interconnect_bytes_per_second_bidir=276e9,
        pcie_bytes_per_second_bidir=64e9,
        confidence="high",
        source=(
            "AMD Instinct MI100 spec table as reproduced at https://www.notebookcheck.net/AMD-announces-CDNA-based-Instinct-MI100-GPU-with-120-CUs-for-HPC-promises-up-to-2-1x-more-performance-per-dollar-compared-to-the-NVIDIA-A100.504329.0.html (FP16 matrix 184.6, bfloat16 92.3 TFLOPs, INT4/INT8 184.6 TOPS, 32 GB HBM2, 1.23 TB/s, PCIe Gen4, Infinity Fabric 3 links / 276 GB/s, 300 W; no sparsity on CDNA 1) | https://alkhaleejtoday.co/international/5374756/Server-accelerator-AMD-Instinct-MI100-Without-Radeon-but-with-115-FP64.html (four HBM2 stacks at 1.228 TB/s; three Infinity links at 92 GB/s = 276 GB/s) | ROCm 'AMD GPU specifications', https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html (source: ROCm/rocm-docs docs/reference/gpu-specs.rst) (MI100 gfx908, 120 CUs, VRAM 32 GiB)"
        ),
    ),
    "mi210": Hardware(
        slug="mi210",
        name="AMD Instinct MI210 64GB (PCIe)",
        vendor="AMD",
        hbm_bytes=64e9,
        hbm_bytes_per_second=1.6e12,
        peak_flops_per_second={"bf16": 181e12, "fp16": 181e12, "int8": 181e12},
        interconnect="Infinity Fabric bridge (3 links, cards bridged in 2s or 4s)",
        interconnect_bytes_per_second_bidir=300e9,
        pcie_bytes_per_second_bidir=64e9,
        confidence="medium",
        source=(
            "https://www.anandtech.com/show/17326/amd-releases-instinct-mi210-accelerator-cdna-2-on-a-pcie-card, copy at http://pipedot.org/article/5XCG1 (MI210: 104 CUs, FP16 matrix 181 TFLOPS, INT8 matrix 181 TOPS, 3.2 Gbps HBM2E 4096-bit, 1.6 TB/s, 64 GB, 3 Infinity Fabric links, 300 W, PCIe 4.0) | ROCm 'AMD Instinct MI250 microarchitecture', https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi250.html (source: ROCm/legacy-rocm-build docs/conceptual/gpu-arch/mi250.md) (CDNA 2: matrix BF16 at the FP16 rate, 1024 FLOPS/clock/CU; an Infinity Fabric link 50 GB/s per direction, 100 GB/s bidirectional: 3 links = 300 GB/s) | https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html (MI210 gfx90a, VRAM 64 GiB)"
        ),
    ),
    "mi250x": Hardware(
        slug="mi250x",
        name="AMD Instinct MI250X, one GCD (each OAM module is 2 GCDs, 2 devices to ROCm/vLLM)",
        vendor="AMD",
        hbm_bytes=64e9,
        hbm_bytes_per_second=1.6e12,
        peak_flops_per_second={"bf16": 191.5e12, "fp16": 191.5e12, "int8": 191.5e12},
        interconnect="Infinity Fabric (4 links to the other GCD of its OAM; 1-2 to other OAMs)",
        interconnect_bytes_per_second_bidir=400e9,
        pcie_bytes_per_second_bidir=64e9,
        confidence="medium",
        source=(
            "AMD Instinct MI250X spec table (per OAM: FP16/BF16 up to 383.0 TF, INT8 383.0 TOPS, 128 GB HBM2e, 3.2 TB/s) as reproduced at https://zexron.com/amd-mi250-x-aldebaran-as-mcm-with-up-to-479-teraflop-s-and-560-watt-tdp, and https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html via https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md ('AMD MI250X has 2 GCDs - so the theoretical TFLOPS needs to be halved ... 383TFLOPS is reported for 2 GCDs') | ROCm 'AMD Instinct MI250 microarchitecture', https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi250.html (source: ROCm/legacy-rocm-build docs/conceptual/gpu-arch/mi250.md) ('two GCDs, each of which constitutes one GPU device'; HBM2e '1.6 TB/sec per GCD'; the two GCDs of an OAM joined by four links, 'bidirectional peak transfer bandwidth of 400 GB/sec'; each GCD its own PCIe Gen 4 x16) | https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html (MI250X: VRAM 128 GiB, 220 CUs, 110 per GCD)"
        ),
    ),
    "mi355x": Hardware(
        slug="mi355x",
        name="AMD Instinct MI355X 288GB",
        vendor="AMD",
        hbm_bytes=288e9,
        hbm_bytes_per_second=8e12,
        peak_flops_per_second={
            "bf16": 2500e12,
            "fp16": 2500e12,
            "fp8": 5000e12,
            "int8": 5000e12,
            "fp4": 10100e12,
        },
        interconnect="Infinity Fabric (7 x 153.6 GB/s links)",
        interconnect_bytes_per_second_bidir=1075.2e9,
        pcie_bytes_per_second_bidir=128e9,
        confidence="medium",
        source=(
            "https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html via https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md (dense: FP16/BF16 2500, FP8 5000, INT8 5000, FP6/FP4 10100 TFLOPS; 'AMD also publishes with Structured Sparsity variants at exactly 2x'; 2.5 PF is AMD's rounding of 2400 MHz x 512 FMA x 2 x 1024 matrix cores = 2516.6; 288 GB HBM3e, 8.00 TB/s) | https://www.theregister.com/2025/06/12/amd_mi355x/ (288 GB HBM3E, 8 TB/s, 1.4 kW) | https://pudn.club/news/amd-dives-deep-on-cdna-4-architecture-and-mi350-accelerator-at-hot-chip-2025 (Hot Chips 2025: 7 Infinity Fabric links per socket) | https://humeconsulting.co/amd-mi355x-strong-node-level-inference-but-not-yet-rack-scale (Infinity Fabric '~153 GB/s of bidirectional bandwidth' per link; 1075.2 = 7 x 153.6, AMD's own link figure not retrieved here) | https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html (MI355X gfx950, 256 CUs, VRAM 288 GiB) | https://raw.githubusercontent.com/mlcommons/inference_results_v6.0/main/closed/AMD/results/87xMI355X_22xEPYC_9575F/summary.html (MI355X 288GB HBM3e, PCIe Gen 5 x16, XGMI)"
        ),
    ),
}

# Maximum achievable matmul FLOP/s (MAMF): the best BF16 `torch.matmul` throughput a brute-force
# search over shapes found on one device (mean of 100 iterations after 50 warm-up), measured by
# Stas Bekman and contributors with mamf-finder.py: the "Maximum Achievable Matmul FLOPS
# comparison table" (BF16) of stas00/ml-engineering compute/accelerator/README.md @ 744d01e1
# (2026-08-22; CC BY-SA 4.0). Datasheet peaks are never reached, and not by the same share on
# every chip: 87 % on an A100 SXM, 80 % on an H100, 78 % on a B200, 51 % on an MI300X. The
# table's "A100 SXM" row states no memory size (both SXM4 cards are the same GA100 at the same
# clocks); its H100 row says "H200 is the same".
MAMF_BF16_FLOPS_PER_SECOND: dict[str, float] = {
    "a100-80gb-sxm": 271.2e12,
    "a100-40gb-sxm": 271.2e12,
    "a100-80gb-pcie": 252.9e12,
    "a100-40gb-pcie": 252.9e12,
    "h100-sxm": 794.5e12,
    "h200-sxm": 794.5e12,
    "b200": 1745.0e12,
    "b300": 1769.0e12,
    "gb200-gpu": 1822.0e12,
    "mi300x": 668.4e12,
    "mi325x": 784.9e12,
    "mi355x": 1565.0e12,
}


def achievable_matmul_share(gpu: str | Hardware) -> float | None:
    """The measured maximum achievable BF16 matmul over the catalog's dense BF16 peak
    (`MAMF_BF16_FLOPS_PER_SECOND`: 794.5 / 989.4 = 0.80 on an H100 SXM); None where unmeasured."""
    hardware = get_gpu(gpu)
    mamf = MAMF_BF16_FLOPS_PER_SECOND.get(hardware.slug)
    if mamf is None:
        return None
    return mamf / hardware.peak_flops_per_second["bf16"]
