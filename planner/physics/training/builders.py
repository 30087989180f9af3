"""Model and GPU builders for tests, doctests and what-ifs: bare numbers to catalog types.

``h800_from`` derives the H800 (an H100 SXM with NVLink cut to 400 GB/s) for the calibration on
DeepSeek's runs, without adding a GPU to the purchase catalog.
"""

from __future__ import annotations

from planner.inputs.catalog import GpuSpec, ModelArch

# ----------------------------------------------------------------------------- doctest helpers


def _toy_gpu() -> GpuSpec:
    """An H100 SXM spec for doctests (the catalog is the real source)."""
    return make_gpu("h100-sxm", "H100 SXM", 80, 3350, 989.4, 1978.9, 900, 5, True, "sxm")


def _toy_model() -> ModelArch:
    """Llama-2-7B for doctests."""
    return llama_like("llama-2-7b", 6.74e9, 32, 4096, 32, 32, 11008, 32000)


def make_gpu(
    gid: str,
    name: str,
    mem_gb: float,
    bw_gbs: float,
    bf16: float,
    fp8: float | None,
    nvlink: float,
    pcie_gen: int,
    p2p: bool,
    form: str,
    consumer: bool = False,
) -> GpuSpec:
    """Build a GpuSpec from bare numbers (tests, doctests, what-ifs); prices are placeholders."""

    def s(v: float) -> dict:
        return {"value": v, "source": "test", "as_of": "2025-01"}

    return GpuSpec.model_validate(
        {
            "id": gid,
            "name": name,
            "class": "consumer" if consumer else "datacenter",
            "form_factor": form,
            "memory_gb": s(mem_gb),
            "memory_bandwidth_gbs": s(bw_gbs),
            "bf16_dense_tflops": s(bf16),
            "fp8_dense_tflops": s(fp8) if fp8 else None,
            "interconnect": {
                "nvlink_gbs": nvlink,
                "pcie_gen": pcie_gen,
                "p2p": p2p,
                "source": "test",
                "as_of": "2025-01",
            },
            "tdp_w": s(700),
            "idle_w": s(100),
            "host_w_per_gpu": s(200),
            "node_size": s(8 if form == "sxm" else 1),
            "purchase_usd": {**s(1.0), "low": 1.0, "high": 1.0},
            "server_overhead_usd_per_gpu": {**s(1.0), "low": 1.0, "high": 1.0},
        }
    )


def llama_like(
    mid: str,
    params: float,
    layers: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    intermediate: int,
    vocab: int,
    max_context: int = 4096,
) -> ModelArch:
    """Build a ModelArch from bare numbers."""
    return ModelArch(
        id=mid,
        name=mid,
        params=params,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        intermediate=intermediate,
        vocab=vocab,
        max_context=max_context,
        source="test",
        as_of="2025-01",
    )


def derive_model(params: float) -> ModelArch:
    """A plausible Llama-like architecture with ``params`` parameters.

    Llama proportions: hidden ~ 128 x layers (Llama-2-7B 4096/32, 13B 5120/40) rounded to a
    multiple of 1024 (so the head count divides by 8), head_dim 128,
    SwiGLU inner size ~ 8/3 hidden (rounded to 256), 32k vocabulary, grouped-query attention with
    8 KV heads from 30B up; layers from ``params ~ 12 L h^2 + 2 V h``.

    >>> m = derive_model(7e9)
    >>> m.layers, m.hidden, m.heads, m.kv_heads
    (33, 4096, 32, 32)
    >>> derive_model(70e9).kv_heads
    8
    """
    vocab = 32000
    hidden_guess = 128 * max(2.0, (params / (12 * 128**2)) ** (1 / 3))
    step = 1024 if hidden_guess >= 2048 else 256  # heads a multiple of 8 for tensor parallelism
    hidden = max(256, int(round(hidden_guess / step)) * step)
    body = max(params - 2 * vocab * hidden, params * 0.5)
    layers = max(2, round(body / (12 * hidden**2)))
    heads = hidden // 128
    kv_heads = 8 if params >= 30e9 and heads % 8 == 0 else heads
    inter = int(round(8 / 3 * hidden / 256)) * 256
    return llama_like(
        f"custom-{params / 1e9:g}b",
        params,
        layers,
        hidden,
        heads,
        kv_heads,
        inter,
        vocab,
        max_context=131072,
    )


H800_NVLINK_GBS = 400.0
H800_SOURCE = (
    "DeepSeek-V3 Technical Report (arXiv:2412.19437) s3.1: H800 nodes of 8 GPUs on NVLink/NVSwitch, "
    "NVLink ~160 GB/s achieved vs IB 50 GB/s; NVIDIA H800 SXM5 specification: NVLink 400 GB/s "
    "(H100 SXM5: 900 GB/s), same Hopper compute and 80 GB HBM3"
)


def h800_from(h100: GpuSpec) -> GpuSpec:
    """The H800 SXM: an H100 SXM with ``nvlink_gbs`` 400 (bidirectional) instead of 900.

    >>> h800_from(_toy_gpu()).interconnect.nvlink_gbs
    400.0
    """
    ic = h100.interconnect.model_copy(update={"nvlink_gbs": H800_NVLINK_GBS, "source": H800_SOURCE})
    return h100.model_copy(update={"id": "h800", "name": "NVIDIA H800 SXM5", "interconnect": ic})
