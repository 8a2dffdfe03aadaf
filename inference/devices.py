"""Which device and precision run the encoders, and at what batch size: a pure policy plus one probe of the GPU.

Why a policy function of plain values: the choice (a CUDA GPU when one is there, fp16 autocast and a large batch on
it, the CPU's bf16-or-fp32 rule unchanged otherwise) is tested on machines without a GPU by passing
`cuda_available` in, and the encoders, the reranker and training read the same answer.

Precision on CUDA: fp16 autocast (fp32 weights, LayerNorm, softmax and pooling in fp32, matmuls in fp16), the
GPU's counterpart of the CPU's bf16 autocast. The bar it must keep is the CPU path's: cached vectors are shared
across precisions (one cache key per model), so a half-precision vector must stay at cosine >= FP16_MIN_COSINE to
the fp32 one, the figure bench_embedding.py measured for bf16 on the CPU (README, "EMBEDDING_PRECISION").
bench/bench_encoder_device.py measures fp16 against fp32 on a GPU and prints whether the bar holds; where it does
not, EMBEDDING_PRECISION=fp32 keeps the GPU at full precision.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DEVICE_SETTINGS = ("auto", "cpu", "cuda", "cuda:N")
_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d{1,3})?)$")
PRECISIONS = ("auto", "fp32", "bf16")
# the bar a half-precision vector keeps to fp32: bf16 autocast on the CPU measured cosine >= 0.9999 (mean and min
# 1.0000 at 4 decimals, bench_embedding.py); fp16 on a GPU is adopted by `auto` under the same bar
FP16_MIN_COSINE = 0.9999


class DeviceError(ValueError):
    """EMBEDDING_DEVICE (or EMBEDDING_QUERY_DEVICE) names a device this machine cannot run."""


@dataclass(frozen=True)
class EncodingPlan:
    """Where and how a batch is encoded: device ("cpu", "cuda", "cuda:N"), dtype ("fp32", "bf16", "fp16") and
    the texts per forward pass."""

    device: str
    dtype: str
    batch_size: int

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def describe(self) -> str:
        return f"{self.device} {self.dtype}, batch {self.batch_size}"


def parse_device(value: str, *, setting: str = "EMBEDDING_DEVICE") -> str:
    """The normalised setting (auto, cpu, cuda, cuda:N); anything else is a DeviceError naming the setting."""
    text = (value or "auto").strip().lower()
    if not _DEVICE_RE.fullmatch(text):
        raise DeviceError(f"{setting}={value!r} is not a device: use one of {', '.join(DEVICE_SETTINGS)}.")
    return text


def resolve_device(value: str, *, cuda_available: bool, cuda_count: int = 1, setting: str = "EMBEDDING_DEVICE") -> str:
    """`auto` -> "cuda" where torch sees a CUDA GPU, else "cpu"; an explicit GPU that is not there is an error,
    not a silent fall back to the CPU (a job sized for a GPU would run for hours instead of minutes)."""
    device = parse_device(value, setting=setting)
    if device == "auto":
        return "cuda" if cuda_available else "cpu"
    if device.startswith("cuda"):
        if not cuda_available:
            raise DeviceError(f"{setting}={value!r} asks for a CUDA GPU, but torch sees none "
                              "(torch.cuda.is_available() is False): set it to cpu or auto.")
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        if index >= cuda_count:
            raise DeviceError(f"{setting}={value!r}: this machine has {cuda_count} CUDA device(s), "
                              f"numbered from 0.")
    return device


def resolve_precision(setting: str, *, device: str = "cpu", cpu_native_bf16: bool = False) -> str:
    """The dtype a device runs: `auto` is bf16 on a CPU with native bf16 (else fp32) and fp16 on a GPU; `fp32`
    and `bf16` force one everywhere. An unknown setting is a DeviceError naming it."""
    value = (setting or "auto").strip().lower()
    if value not in PRECISIONS:
        raise DeviceError(f"EMBEDDING_PRECISION={setting!r} is not one of {', '.join(PRECISIONS)}.")
    if value != "auto":
        return value
    if device.startswith("cuda"):
        return "fp16"
    return "bf16" if cpu_native_bf16 else "fp32"


def choose_encoding(*, device: str, precision: str = "auto", cpu_native_bf16: bool = False, cpu_batch: int = 16,
                    gpu_batch: int = 256) -> EncodingPlan:
    """The plan for a resolved device. A CPU keeps its measured batch (EMBEDDING_BATCH_SIZE, 16: fastest on 2
    cores) and its bf16-or-fp32 rule; a GPU is fed EMBEDDING_GPU_BATCH_SIZE texts per pass (a small batch leaves
    it idle between kernel launches) in fp16 autocast unless EMBEDDING_PRECISION forces a dtype."""
    dtype = resolve_precision(precision, device=device, cpu_native_bf16=cpu_native_bf16)
    batch = gpu_batch if device.startswith("cuda") else cpu_batch
    return EncodingPlan(device=device, dtype=dtype, batch_size=max(1, int(batch)))


@lru_cache(maxsize=1)
def cuda_devices() -> int:
    """How many CUDA devices torch sees (0 when none). On Linux a machine without the NVIDIA driver answers
    from /proc without importing torch (seconds), so /healthz stays cheap on CPU-only machines."""
    if sys.platform.startswith("linux") and not Path("/proc/driver/nvidia/version").exists():
        return 0
    try:
        import torch  # noqa: PLC0415 - heavy: only a machine with the NVIDIA driver asks torch

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken CUDA install is a machine without a usable GPU
        return 0
