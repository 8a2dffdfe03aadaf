"""Where the encoders run: a GPU when torch sees one, the CPU otherwise, with each device's precision and batch.

The policy takes the GPU's presence as a value, so both branches are tested on machines without one; the encoders
themselves run on this machine's CPU."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from django.test import Client

from config.errors import DependencyDown
from inference import encoders
from inference.devices import (
    FP16_MIN_COSINE,
    DeviceError,
    EncodingPlan,
    choose_encoding,
    parse_device,
    resolve_device,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("cuda", "expected"), [(True, "cuda"), (False, "cpu")])
def test_auto_device_is_the_gpu_only_when_torch_sees_one(cuda, expected):
    assert resolve_device("auto", cuda_available=cuda) == expected
    assert resolve_device("", cuda_available=cuda) == expected  # unset reads as auto


@pytest.mark.parametrize("value", ["cpu", "cuda", "cuda:1", " CUDA:0 "])
def test_explicit_devices_are_kept_when_the_machine_has_them(value):
    assert resolve_device(value, cuda_available=True, cuda_count=2) == value.strip().lower()


def test_asking_for_a_gpu_on_a_machine_without_one_fails_naming_the_setting():
    with pytest.raises(DeviceError, match=r"EMBEDDING_DEVICE='cuda' asks for a CUDA GPU, but torch sees none"):
        resolve_device("cuda", cuda_available=False, cuda_count=0)
    with pytest.raises(DeviceError, match=r"EMBEDDING_QUERY_DEVICE='cuda:3': this machine has 2 CUDA device"):
        resolve_device("cuda:3", cuda_available=True, cuda_count=2, setting="EMBEDDING_QUERY_DEVICE")


@pytest.mark.parametrize("value", ["gpu", "cuda:", "cuda:x", "mps", "cpu0", "cuda:1234"])
def test_a_value_that_is_not_a_device_fails_clearly(value):
    with pytest.raises(DeviceError, match=rf"EMBEDDING_DEVICE={value!r} is not a device: use one of auto, cpu"):
        parse_device(value)


def test_a_bad_device_setting_stops_start_up_with_its_name():
    env = {**os.environ, "EMBEDDING_DEVICE": "gpu", "DJANGO_SETTINGS_MODULE": "config.settings"}
    proc = subprocess.run([sys.executable, "-c", "import config.settings"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert "ImproperlyConfigured: EMBEDDING_DEVICE='gpu' is not a device" in proc.stderr


def test_gpu_plan_is_fp16_autocast_with_a_large_batch():
    assert choose_encoding(device="cuda", gpu_batch=256) == EncodingPlan(device="cuda", dtype="fp16", batch_size=256)
    assert choose_encoding(device="cuda:1", precision="fp32", gpu_batch=512).dtype == "fp32"  # forced full
    assert choose_encoding(device="cuda", precision="bf16").dtype == "bf16"
    assert FP16_MIN_COSINE == 0.9999  # the bar the CPU's bf16 path keeps (README, EMBEDDING_PRECISION)


@pytest.mark.parametrize(("setting", "native", "expected"), [
    ("auto", True, "bf16"), ("auto", False, "fp32"), ("fp32", True, "fp32"), ("bf16", False, "bf16")])
def test_cpu_plan_keeps_its_batch_and_its_bf16_rule(setting, native, expected):
    plan = choose_encoding(device="cpu", precision=setting, cpu_native_bf16=native, cpu_batch=16, gpu_batch=256)
    assert plan == EncodingPlan(device="cpu", dtype=expected, batch_size=16)


def test_an_unknown_precision_names_its_setting():
    with pytest.raises(DeviceError, match="EMBEDDING_PRECISION='fp8'"):
        choose_encoding(device="cuda", precision="fp8")


def test_on_a_cpu_machine_auto_encodes_on_the_cpu_exactly_as_device_cpu(settings):
    """The default (auto) changes nothing on a machine without a GPU: same plan, same vectors, one model copy."""
    if encoders.cuda_devices():
        settings.EMBEDDING_DEVICE = "cpu"  # a GPU machine: compare the CPU path with itself
    plan = encoders.encoding_plan()
    assert plan == EncodingPlan(device="cpu", dtype=encoders.precision(), batch_size=settings.EMBEDDING_BATCH_SIZE)
    texts = ["def deduct(*, user, amount):\n    return charge(user, amount)" * 5, "class Ledger: ..."]
    auto = encoders.embed_texts(texts)
    settings.EMBEDDING_DEVICE = "cpu"
    assert np.array_equal(auto, encoders.embed_texts(texts))
    assert encoders.get_dense_model(query=True) is encoders.get_dense_model()  # queries share the copy


def test_queries_run_on_the_query_device_setting(settings):
    settings.EMBEDDING_DEVICE = "cpu"
    settings.EMBEDDING_QUERY_DEVICE = "cuda:999"  # no machine has it: the query path must read this setting
    with pytest.raises(DependencyDown, match="EMBEDDING_QUERY_DEVICE='cuda:999'"):
        encoders.embed_query("where are credits deducted?")
    assert encoders.embed_texts(["batches still run on the cpu"]).shape[0] == 1


def test_embedding_on_a_missing_gpu_is_a_503_naming_the_setting(settings):
    settings.EMBEDDING_DEVICE = "cuda:999"
    with pytest.raises(DependencyDown, match="EMBEDDING_DEVICE='cuda:999'"):
        encoders.embed_texts(["a chunk"])
    with pytest.raises(DependencyDown, match="EMBEDDING_DEVICE='cuda:999'"):
        encoders.training_device()


@pytest.mark.django_db
def test_healthz_tells_staff_which_device_and_precision_embed(settings, make_user):
    settings.EMBEDDING_DEVICE = "cpu"
    client = Client()
    client.force_login(make_user(staff=True))
    emb = client.get("/healthz").json()["checks"]["embeddings"]
    assert emb["ok"] and emb["device"] == "cpu" and emb["precision"] == encoders.precision()
    assert emb["query_device"] == "cpu" and emb["batch_size"] == settings.EMBEDDING_BATCH_SIZE
    assert f"batches on cpu {encoders.precision()}, batch {settings.EMBEDDING_BATCH_SIZE}" in emb["detail"]
    settings.EMBEDDING_DEVICE = "cuda:999"
    emb = client.get("/healthz").json()["checks"]["embeddings"]
    assert not emb["ok"] and "EMBEDDING_DEVICE='cuda:999'" in emb["detail"]
    anonymous = Client().get("/healthz").json()["checks"]["embeddings"]
    assert anonymous == {"ok": False}  # devices, like every detail, are for staff
