"""Encoder throughput and drift per device and precision, as the product runs them (inference.devices).

Why: EMBEDDING_DEVICE=auto moves batches to a CUDA GPU in fp16 autocast when one is there. That is only right if
fp16 keeps the vectors where the CPU's bf16 path keeps them (cosine to fp32 >= FP16_MIN_COSINE, since cached
vectors of every precision share one cache key), and it only pays if a GPU batch is much faster than the CPU.
This measures both on whatever machine runs it: the CPU path (fp32, and bf16 where the CPU has it natively), and,
when torch sees a GPU, fp32 and fp16 there with the GPU batch, plus one-query latency on each device (why
EMBEDDING_QUERY_DEVICE stays cpu). Texts: this repository's source in 40-line chunks, spread over the tree.

    .venv/bin/python bench/bench_encoder_device.py [--chunks 300] [--name encoder_device]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, table, write_result

LINES = 40


def _chunks(n: int) -> list[str]:
    """40-line windows of the files the code reader takes (search.ingest.code.walk), spread evenly over the tree."""
    from search.ingest.code import walk

    out: list[str] = []
    for _, path, reason in walk(ROOT):
        if reason or path.suffix not in {".py", ".md", ".html", ".js", ".toml", ".txt", ".yml", ".yaml"}:
            continue
        lines = path.read_text(errors="replace").splitlines()
        out += ["\n".join(lines[i:i + LINES]) for i in range(0, len(lines), LINES)
                if "\n".join(lines[i:i + LINES]).strip()]
    step = max(1, len(out) // n)
    return out[::step][:n]


def _encode(model, texts: list[str], *, mode: str, device: str, batch: int):
    from inference.encoders import inference_context

    with inference_context(mode, device=device):
        return model.encode(texts, batch_size=batch, normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False)


def _rate(model, texts: list[str], *, mode: str, device: str, batch: int, repeats: int):
    """(vectors, chunks/s best of `repeats`, after one warm-up pass over a slice)."""
    _encode(model, texts[: batch * 2], mode=mode, device=device, batch=batch)
    best, vecs = 0.0, None
    for _ in range(repeats):
        if device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()
        t0 = time.perf_counter()
        vecs = _encode(model, texts, mode=mode, device=device, batch=batch)
        best = max(best, len(texts) / (time.perf_counter() - t0))
    return vecs, best


def _query_ms(model, *, mode: str, device: str, n: int = 40) -> float:
    queries = [f"where is the rate limit for request kind {i} checked?" for i in range(n)]
    _encode(model, queries[:3], mode=mode, device=device, batch=1)
    times = []
    for q in queries:
        t0 = time.perf_counter()
        _encode(model, [q], mode=mode, device=device, batch=1)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--name", default="encoder_device")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.filterwarnings("ignore")
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()  # no services are started: only the encoders and the device policy are imported
    from django.conf import settings
    from sentence_transformers import SentenceTransformer

    from inference.devices import FP16_MIN_COSINE
    from inference.encoders import cpu_has_native_bf16, cuda_devices, encoding_plan, resolve_model

    texts = _chunks(args.chunks)
    chars = statistics.mean(len(t) for t in texts)
    batch_plan, query_plan = encoding_plan(), encoding_plan(query=True)
    model_id, path = resolve_model()
    cpu = SentenceTransformer(path, device="cpu")
    rows: list[list[object]] = []
    ref, cpu32 = _rate(cpu, texts, mode="fp32", device="cpu", batch=settings.EMBEDDING_BATCH_SIZE,
                       repeats=args.repeats)
    rows.append(["cpu", "fp32", settings.EMBEDDING_BATCH_SIZE, round(cpu32, 1), 1.0, "1.0000", "1.0000",
                 f"{_query_ms(cpu, mode='fp32', device='cpu'):.1f}"])
    native = cpu_has_native_bf16()
    vecs, cpu16 = _rate(cpu, texts, mode="bf16", device="cpu", batch=settings.EMBEDDING_BATCH_SIZE,
                        repeats=args.repeats)
    cos = (ref * vecs).sum(1)
    rows.append(["cpu", "bf16 autocast" + ("" if native else " (emulated: auto keeps fp32)"),
                 settings.EMBEDDING_BATCH_SIZE, round(cpu16, 1), round(cpu16 / cpu32, 2), f"{cos.mean():.4f}",
                 f"{cos.min():.4f}", f"{_query_ms(cpu, mode='bf16', device='cpu'):.1f}"])
    verdict = "no CUDA GPU on this machine: the fp16 rule is checked where one is (the same script)"
    if cuda_devices():
        import torch

        gpu = SentenceTransformer(path, device="cuda")
        batch = settings.EMBEDDING_GPU_BATCH_SIZE
        g32, r32 = _rate(gpu, texts, mode="fp32", device="cuda", batch=batch, repeats=args.repeats)
        c32 = (ref * g32).sum(1)
        rows.append(["cuda", "fp32", batch, round(r32, 1), round(r32 / cpu32, 2), f"{c32.mean():.4f}",
                     f"{c32.min():.4f}", f"{_query_ms(gpu, mode='fp32', device='cuda'):.1f}"])
        g16, r16 = _rate(gpu, texts, mode="fp16", device="cuda", batch=batch, repeats=args.repeats)
        c16 = (ref * g16).sum(1)
        rows.append(["cuda", "fp16 autocast", batch, round(r16, 1), round(r16 / cpu32, 2), f"{c16.mean():.4f}",
                     f"{c16.min():.4f}", f"{_query_ms(gpu, mode='fp16', device='cuda'):.1f}"])
        ok = float(c16.min()) >= FP16_MIN_COSINE
        verdict = (f"fp16 on {torch.cuda.get_device_name(0)}: min cosine to CPU fp32 {c16.min():.5f} "
                   f"{'>=' if ok else '<'} {FP16_MIN_COSINE} -> "
                   + ("the fp16 rule holds (EMBEDDING_PRECISION=auto keeps fp16)" if ok else
                      "the rule FAILS: set EMBEDDING_PRECISION=fp32 on this GPU"))
    headers = ["device", "precision", "batch", "chunks/s", "vs CPU fp32", "cosine to CPU fp32, mean", "min",
               "one query, p50 ms"]
    text = "\n".join([
        f"# Encoder device and precision ({model_id})", "",
        f"`.venv/bin/python bench/bench_encoder_device.py --chunks {args.chunks}`: {len(texts)} chunks of "
        f"{LINES} lines of this repository's source (mean {chars:.0f} characters), best of {args.repeats} passes "
        "after a warm-up; cosine is each vector against the CPU fp32 one of the same chunk.", "",
        f"Plan on this machine (EMBEDDING_DEVICE={settings.EMBEDDING_DEVICE}, "
        f"EMBEDDING_QUERY_DEVICE={settings.EMBEDDING_QUERY_DEVICE}, EMBEDDING_PRECISION="
        f"{settings.EMBEDDING_PRECISION}): batches on {batch_plan.describe()}; queries on {query_plan.describe()}.",
        "", table(headers, rows), "",
        f"fp16 rule: on a GPU, `auto` runs fp16 autocast only where its vectors keep min cosine >= "
        f"{FP16_MIN_COSINE} to fp32 (the bar the CPU's bf16 path keeps). {verdict}.", "",
        machine(),
    ])
    write_result(args.name, text)


if __name__ == "__main__":
    main()
