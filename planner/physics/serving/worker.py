"""The physics of one worker: G GPUs in mode tp, ep or dep, within the scale-up domain or across
servers (:mod:`planner.physics.serving.deployment`).

A decode step of ``n`` sequences (each verifying ``1 + draft`` tokens with MTP) on one worker::

    step = (max(weights_read / weight_bw + kv_read / (bw x kv_bw_eff), flops / (peak x eff))
            + communication + layer overheads) / vendor serve_efficiency

per GPU, where by mode

* ``tp``: weights / G (experts sliced), the KV cache of all n sequences x the GPU's share
  (MLA: whole), flops / G, 2 all-reduces per layer;
* ``ep``: attention and dense weights / G, the whole experts of the busiest GPU
  (:func:`planner.physics.moe.ep_max_local_experts`), the KV cache and flops as tp, 2
  all-reduces per layer;
* ``dep``: attention and dense weights *replicated*, whole experts of the busiest GPU; the KV
  cache and attention flops of the busiest attention rank (``n/G + dp_imbalance x
  sqrt(n/G x 2 ln G)`` sequences: the data-parallel imbalance); the expert flops / G; one
  dispatch (FP8) and one combine (BF16) all-to-all per MoE layer, ``(1 - a2a_overlap)`` of it
  exposed (two-batch overlap), over NVLink inside the scale-up domain and at the scale-out
  fabric's per-GPU bandwidth for the share of peers outside it.

A worker of G <= one server in tp or ep is exactly today's replica (:mod:`planner.physics.serve`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import planner.physics.serving.replica as legacy
from planner.inputs.catalog import GpuSpec, ModelArch
from planner.inputs.model_arch import DraftAcceptance
from planner.physics.calibration.values import Calibration
from planner.physics.moe import (
    attn_flops_per_token,
    compute_params,
    ep_max_local_experts,
    ep_routed_params_read,
    expert_params,
    kv_read_bytes_per_token,
    kv_share_per_gpu,
    prefill_attn_flops,
    routed_params_read,
    weight_params_read,
)
from planner.physics.serve_weights import (
    PRECISIONS,
    moe_factors,
    weight_bw,
    weight_bytes_per_param,
    with_layout,
)
from planner.physics.serving.constants import const
from planner.physics.serving.deployment import MAX_WORKER_GPUS, Worker
from planner.physics.serving.prefix import (
    idle_kv_share,
    new_tokens,
    offload_batch_cap,
    prefill_flops,
    reload_s,
)
from planner.physics.train import GB, allreduce_s, inter_node_link, intra_node_link, node_gpus
from planner.physics.vendor import serve_efficiency


def scaleup_domain(gpu: GpuSpec, calib: Calibration) -> int:
    """GPUs joined by the scale-up link (NVLink/xGMI): 72 on an NVL72 rack, 8 on an HGX server.

    >>> from planner.physics.train import _toy_gpu
    >>> from planner.physics.calibration.values import default_calibration
    >>> scaleup_domain(_toy_gpu(), default_calibration())
    8
    """
    d = gpu.interconnect.domain_gpus
    return int(d) if d else node_gpus(gpu, calib)


def allowed_gpus(gpu: GpuSpec, calib: Calibration) -> str:
    """What G a worker on ``gpu`` may have, in words."""
    dom = scaleup_domain(gpu, calib)
    if gpu.consumer or dom < 4:
        return f"1, 2, 4 or 8 up to one server ({dom} GPUs)"
    return (
        f"1, 2 or a multiple of 4, up to {MAX_WORKER_GPUS} (beyond {dom} GPUs the worker spans "
        "servers or racks over the scale-out fabric)"
    )


def gpus_error(gpu: GpuSpec, g: int, calib: Calibration) -> str | None:
    """Why a worker of ``g`` GPUs cannot be built from ``gpu`` (None: it can): G is 1, 2 or a
    multiple of 4 (a whole quarter of an HGX board, a whole GB200 compute tray), at most
    :data:`MAX_WORKER_GPUS`; consumer cards stay in one server.

    >>> from planner.physics.train import _toy_gpu
    >>> from planner.physics.calibration.values import default_calibration
    >>> gpus_error(_toy_gpu(), 16, default_calibration()) is None
    True
    >>> gpus_error(_toy_gpu(), 3, default_calibration())[:20]
    'a worker of 3 x h100'
    """
    dom = scaleup_domain(gpu, calib)
    if gpu.consumer or dom < 4:
        ok = g in (1, 2, 4, 8) and g <= dom
    else:
        ok = (g in (1, 2) or g % 4 == 0) and g <= MAX_WORKER_GPUS
    if ok:
        return None
    return f"a worker of {g} x {gpu.id} cannot be built: G must be {allowed_gpus(gpu, calib)}"


def accepted_tokens(draft: int, acceptance: float, decay: float = 1.0) -> float:
    """Expected tokens one MTP step emits with ``draft`` draft tokens: the verified token plus
    each draft token while all before it were accepted; draft token i is accepted with
    probability ``acceptance x decay^(i-1)`` given the previous (the one MTP module chained on
    its own drafts drifts): ``1 + a1 + a1 a2 + ...``.

    >>> accepted_tokens(0, 0.8), round(accepted_tokens(3, 0.8), 3)
    (1.0, 2.952)
    >>> round(accepted_tokens(3, 0.9, 0.7), 2)  # TRT-LLM B200 batch 1: 2.82 measured
    2.72
    """
    out, p = 1.0, 1.0
    for i in range(draft):
        p *= acceptance * decay**i
        out += p
    return out


def draft_acceptance(model: ModelArch, calib: Calibration) -> DraftAcceptance | None:
    """The measured acceptance a speculative decode assumes: the workload's (set on the
    calibration by :func:`with_draft_acceptance`), else the model's catalog figures, else None
    (the calibration's fitted curve, :func:`accepted_tokens`)."""
    return calib.draft_acceptance or model.draft_acceptance


def with_draft_acceptance(calib: Calibration, acc: DraftAcceptance | None) -> Calibration:
    """``calib`` with a workload's measured acceptance (None: unchanged)."""
    if acc is None:
        return calib
    return calib.model_copy(update={"draft_acceptance": acc})


def acceptance_assumed(model: ModelArch, calib: Calibration) -> tuple[str, str]:
    """(what a speculative decode of ``model`` assumes, its source), in words.

    >>> from planner.physics.calibration.values import default_calibration
    >>> from planner.physics.train import _toy_model
    >>> acceptance_assumed(_toy_model(), default_calibration())[0]
    'AL 1.95 / 2.58 / 2.88 at draft 1 / 2 / 3 (fitted curve: first draft token accepted 0.95, x0.7 per further token)'
    """
    acc = draft_acceptance(model, calib)
    if acc is not None:
        return acc.describe(), acc.source
    a, k = const(calib, "mtp_acceptance"), const(calib, "mtp_acceptance_decay")
    ds = range(1, 4)
    als = " / ".join(f"{accepted_tokens(d, a, k):.3g}" for d in ds)
    what = (
        f"AL {als} at draft 1 / 2 / 3 (fitted curve: first draft token accepted {a:g}, "
        f"x{k:g} per further token)"
    )
    src = calib.serve.mtp_acceptance.source if calib.serve.mtp_acceptance else "planner default"
    return what, src


def mtp_params(model: ModelArch) -> float:
    """Parameters of the draft modules: one transformer layer each (a MoE layer for
    DeepSeek-V3/R1, ~11B of the 14B module with the shared embedding and head),
    ``num_nextn_predict_layers x params / layers``; a model without MTP layers drafts with one
    layer's worth of head (an EAGLE-style draft head trained for it)."""
    return max(1, model.num_nextn_predict_layers) * model.params / model.layers


@dataclass(frozen=True)
class WorkerPhysics:
    """Step times and memory of one worker (``worker.count`` is ignored here). Its shape
    (mode, attention group, ranks, stages) is computed once per instance (``cached_property``:
    the fields are frozen; the Frontier sheet asked for ``mode`` a million times)."""

    model: ModelArch
    gpu: GpuSpec
    worker: Worker
    precision: str
    calib: Calibration
    mtp: bool = False
    draft: int | None = None  # fixed MTP draft length (None: the best at each batch)

    # ------------------------------------------------------------------ shape
    @property
    def g(self) -> int:
        return self.worker.gpus

    @functools.cached_property
    def mode(self) -> str:
        """The effective mode: ep/dep on one GPU is tp; a dense model is tp."""
        if self.g == 1 or self.model.moe is None:
            return "tp"
        return self.worker.mode

    @functools.cached_property
    def is_legacy(self) -> bool:
        """tp/ep within one server at a size today's replicas have: today's physics, exactly."""
        return (
            self.mode in ("tp", "ep")
            and self.g in legacy.TP_SIZES
            and self.g <= node_gpus(self.gpu, self.calib)
            and (self.mode == "tp" or legacy.ep_possible(self.model, self.g))
        )

    @property
    def legacy_calib(self) -> Calibration:
        return with_layout(self.calib, "ep" if self.mode == "ep" else "tp")

    def link(self) -> tuple[float, float]:
        """(GB/s per direction, latency s) of the worker's collectives."""
        if self.g <= scaleup_domain(self.gpu, self.calib):
            return intra_node_link(self.gpu, min(self.g, 8), self.calib)
        return inter_node_link(self.gpu, self.calib)

    # ------------------------------------------------------------------ memory
    @functools.cached_property
    def attn_group(self) -> int:
        """GPUs one attention instance spans: G (tp), 1 (dep), and for ep the tensor-parallel
        group of one server (min(G, 8)): beyond a server, engines run the attention of an
        expert-parallel worker data-parallel across servers (SGLang --dp, TensorRT-LLM
        attention DP), as no one replicates an MLA cache 16 or 72 times."""
        if self.mode == "tp":
            return self.g
        if self.mode == "dep":
            return 1
        return min(self.g, 8)

    @functools.cached_property
    def pp(self) -> int:
        """Pipeline stages of a tp worker wider than the scale-up domain (a whole number of
        domains): tensor parallel inside each server or rack, pipeline parallel across (as
        vLLM and SGLang run TP over several HGX servers); 1 otherwise."""
        dom = scaleup_domain(self.gpu, self.calib)
        if self.mode != "tp" or self.g <= dom or self.g % dom:
            return 1
        return self.g // dom

    def _stage(self) -> WorkerPhysics:
        """One pipeline stage's tensor-parallel group (the whole model's step at 1/pp of the
        batch: a token passes every stage in turn, pp micro-batches in flight)."""
        dom = scaleup_domain(self.gpu, self.calib)
        return WorkerPhysics(self.model, self.gpu, Worker(dom, "tp"), self.precision,
                             self.calib, self.mtp, self.draft)  # fmt: skip

    def _p2p_s(self, tokens: float) -> float:
        """Activations of ``tokens`` tokens across the pp - 1 stage boundaries (s)."""
        bw, lat = inter_node_link(self.gpu, self.calib)
        return (self.pp - 1) * (lat + tokens * self.model.hidden * 2.0 / (bw * GB))

    @functools.cached_property
    def ranks(self) -> int:
        """Data-parallel attention ranks of the worker: G / attn_group."""
        return max(1, self.g // self.attn_group)

    def ranks_busiest(self, n: float) -> float:
        """Sequences on the busiest attention rank: n with one rank, else ``n/r + dp_imbalance x
        sqrt(n/r x 2 ln r)`` for r ranks (at least one while any runs, at most n)."""
        r = self.ranks
        if r <= 1 or n <= 0:
            return n
        per = n / r
        spread = const(self.calib, "dp_imbalance") * math.sqrt(per * 2 * math.log(r))
        return min(n, max(min(n, 1.0), per + spread))

    def _weights_per_gpu_params(self) -> float:
        m, g = self.model, self.g
        extra = mtp_params(m) if self.mtp else 0.0
        total = m.params + extra
        if self.mode == "tp" or m.moe is None:
            return total / g
        exp = expert_params(m) * total / m.params
        slots = math.ceil(m.moe.experts / g) / m.moe.experts  # whole experts, redundant slots
        return (total - exp) / self.attn_group + exp * slots

    def memory_gb(self, batch: float, context: int, prompt: int) -> dict[str, float]:
        """Memory per GPU (GB) with ``batch`` sequences of ``context`` tokens on the worker."""
        c = self.calib
        if self.is_legacy and not self.mtp:
            return legacy.serve_memory_gb(
                self.model, self.g, self.precision, int(batch), context, prompt, c
            )
        b = weight_bytes_per_param(self.precision, c)
        weights = self._weights_per_gpu_params() * b
        kvb = legacy.kv_bytes_per_token(self.model, self.precision, context)
        a = self.attn_group
        kv = batch / self.ranks * context * kvb * kv_share_per_gpu(self.model, a) / self.pp
        kv *= 1.0 + idle_kv_share(self.calib)  # idle sessions' KV held beside the active
        act_share = a
        s = c.serve
        overhead = s.overhead_gb.value + s.activation_gb_per_1k_tokens.value * prompt / 1000 / (
            act_share
        )
        return {"weights": weights / GB, "kv_cache": kv / GB, "overhead": overhead}

    def usable_gb(self) -> float:
        return legacy.memory_cap_gb(self.gpu, self.calib)

    def max_batch(self, prompt: int, output: int) -> int:
        """Most sequences of ``prompt + output`` tokens whose KV cache fits beside the weights."""
        if self.is_legacy and not self.mtp:
            return legacy.max_batch(
                self.model, self.gpu, self.g, self.precision, prompt, output, self.legacy_calib
            )
        ctx = prompt + output
        base = self.memory_gb(0, ctx, prompt)
        free = self.usable_gb() - base["weights"] - base["overhead"]
        if free <= 0:
            return 0
        one = self.memory_gb(1, ctx, prompt)["kv_cache"]
        if one <= 0:
            return 0
        return int(min(free // one, offload_batch_cap(one, self.calib)))

    def check(self, prompt: int, output: int) -> str | None:
        """Why this worker cannot serve at all (None: it can, memory permitting)."""
        m, gpu, g, c = self.model, self.gpu, self.g, self.calib
        p = self.precision
        if p not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {p!r}")
        if prompt < 1 or output < 1:
            raise ValueError("prompt and output must be at least 1 token")
        if p == "fp8" and gpu.fp8_dense_tflops is None:
            return f"{gpu.id} has no FP8 tensor cores (use bf16, int8 or int4)"
        if p == "fp4" and gpu.fp4_dense_tflops is None:
            return (
                f"{gpu.id} has no FP4 tensor cores (NVFP4/MXFP4 need Blackwell or MI355X; "
                "use fp8, int4 or bf16)"
            )
        why = gpus_error(gpu, g, c)
        if why is not None:
            return why
        if self.worker.mode in ("ep", "dep") and m.moe is None:
            return (
                f"mode {self.worker.mode} places whole experts per GPU; {m.id} is dense "
                "(use tp workers)"
            )
        if prompt + output > m.max_context:
            return f"prompt+output {prompt + output} tokens > {m.id} context {m.max_context}"
        mem = self.memory_gb(0, prompt + output, prompt)
        cap = self.usable_gb()
        if mem["weights"] + mem["overhead"] > cap:
            total = mem["weights"] * g
            return (
                f"{p} weights {total:.1f} GB + overhead > {g}x{gpu.memory_gb.value:g} GB "
                f"({c.serve.usable_memory_fraction.value:.0%} usable)"
            )
        if self.max_batch(prompt, output) < 1:
            return (
                f"no room for the KV cache of one {prompt + output}-token context after "
                f"{mem['weights']:.1f} GB of weights per GPU"
            )
        return None

    # ------------------------------------------------------------------ time
    def _weights_read_s(self, tokens: float) -> float:
        m, g, c = self.model, self.g, self.calib
        b = weight_bytes_per_param(self.precision, c)
        wbw = weight_bw(self.gpu, self.precision, c)
        if m.moe is None:
            return m.params * b / g / wbw
        eff, _ = moe_factors(c)
        routed = routed_params_read(m, tokens)
        ne = weight_params_read(m, tokens) - routed
        if self.mode == "tp":
            return (ne + routed / eff) * b / g / wbw
        ep_eff = c.serve.moe_ep_bw_eff.value if c.serve.moe_ep_bw_eff else eff
        busiest = ep_routed_params_read(m, tokens, g) / ep_eff
        return (ne / self.attn_group + busiest) * b / wbw

    def a2a_s(self, tokens_per_gpu: float) -> float:
        """Dispatch (FP8) + combine (BF16) of one MoE layer for ``tokens_per_gpu`` tokens on the
        busiest GPU, each to ``k`` experts spread over the G GPUs (s)."""
        m, g, c = self.model, self.g, self.calib
        if m.moe is None or g <= 1 or tokens_per_gpu <= 0:
            return 0.0
        lat = 2 * const(c, "a2a_latency_us") * 1e-6
        nbytes = tokens_per_gpu * m.moe.experts_per_token * m.hidden * 3.0 * (g - 1) / g
        dom = scaleup_domain(self.gpu, c)
        nv = self.gpu.interconnect.nvlink_gbs / 2 * const(c, "a2a_eff") * GB
        if nv <= 0:
            nv = intra_node_link(self.gpu, min(g, 8), c)[0] * GB
        if g <= dom:
            return lat + nbytes / nv
        # across servers each token crosses the fabric once per *other server* holding one of its
        # k experts (DeepEP's per-node dedupe, forwarded over NVLink inside): of N servers,
        # (N - 1)(1 - (1 - 1/N)^k) expected
        ib = inter_node_link(self.gpu, c)[0] * const(c, "a2a_eff") * GB
        nodes = g / dom
        k = m.moe.experts_per_token
        remote = (nodes - 1) * (1 - (1 - 1 / nodes) ** k)
        outside = tokens_per_gpu * remote * m.hidden * 3.0
        inside = nbytes * (dom - 1) / (g - 1)
        lat += 2 * const(c, "a2a_scaleout_latency_us") * 1e-6
        return lat + max(inside / nv, outside / ib)

    def _comm_s(self, tokens: float, rank_tokens: float) -> float:
        """Communication of one forward: ``tokens`` in all, ``rank_tokens`` on the busiest
        attention rank. tp: 2 all-reduces per layer over G; ep/dep: 2 all-reduces per layer
        inside the attention group (if it has more than one GPU) and, with several ranks, one
        dispatch + combine per MoE layer, ``(1 - a2a_overlap)`` of it exposed."""
        m, g, a = self.model, self.g, self.attn_group
        if g <= 1:
            return 0.0
        if self.mode == "tp" or self.ranks <= 1:
            bw, lat = self.link()
            return 2 * m.layers * allreduce_s(tokens * m.hidden * 2.0, g, bw, lat)
        out = 0.0
        if a > 1:
            bw, lat = intra_node_link(self.gpu, a, self.calib)
            out += 2 * m.layers * allreduce_s(rank_tokens * m.hidden * 2.0, a, bw, lat)
        a2a = self.a2a_s(rank_tokens / a)
        return out + m.moe_layers * a2a * (1 - const(self.calib, "a2a_overlap"))

    def head_padding(self) -> float:
        """Attention work per GPU relative to an even split: ``ceil(heads / G) G / heads``
        (tensor-parallel attention over G GPUs that do not divide the heads)."""
        a = self.attn_group
        if a <= 1:
            return 1.0
        h = self.model.heads
        return math.ceil(h / a) * a / h

    def _peak(self) -> float:
        return legacy.peak_flops(self.gpu, self.precision, self.calib)

    def _attn_peak(self) -> float:
        """Peak FLOP/s of decode attention: the FP8 peak with fp4 weights (FP8 KV cache and
        attention kernels), else the precision's."""
        if self.precision == "fp4" and self.gpu.fp8_dense_tflops is not None:
            return legacy.peak_flops(self.gpu, "fp8", self.calib)
        return self._peak()

    def decode_step_s(self, n: float, context: float, draft: int = 0) -> float:
        """One decode step of ``n`` sequences of mean ``context`` tokens, each verifying
        ``1 + draft`` tokens (MTP), including the ``draft`` draft steps (s)."""
        if self.pp > 1:
            return self._stage().decode_step_s(n / self.pp, context, draft) + self._p2p_s(
                n / self.pp * (1 + draft)
            )
        if self.is_legacy and draft == 0:
            return legacy.decode_step_s(
                self.model, self.gpu, self.g, self.precision, n, context, self.legacy_calib
            )
        main = self._step(n, context, 1 + draft)
        if draft == 0:
            return main
        one = (
            self._step(n, context, 1)
            if not self.is_legacy
            else legacy.decode_step_s(
                self.model, self.gpu, self.g, self.precision, n, context, self.legacy_calib
            )
        )
        return main + draft * const(self.calib, "mtp_draft_layers") / self.model.layers * one

    def _step(self, n: float, context: float, t: int) -> float:
        m, g, c, s = self.model, self.g, self.calib, self.calib.serve
        tokens = n * t
        busy = self.ranks_busiest(n)
        a = self.attn_group
        kvb = kv_read_bytes_per_token(m, self.precision, context)
        kv = busy * context * kvb * kv_share_per_gpu(m, a)
        bw = self.gpu.memory_bandwidth_gbs.value * GB
        t_mem = self._weights_read_s(tokens) + kv / (bw * s.kv_bw_eff.value)
        cp = compute_params(m)
        attn = attn_flops_per_token(m, context) * self.head_padding()
        # attention runs on the KV cache's precision (FP8 beside FP4 weights), not at FP4
        attn_slow = self._peak() / self._attn_peak()
        if self.mode == "tp" or m.moe is None:
            flops = tokens * (2 * cp + attn * attn_slow) / g
        else:
            ne = m.params - expert_params(m)
            flops = busy * t * (2 * ne + attn * attn_slow) / a + tokens * 2 * (cp - ne) / g
        eff = s.decode_compute_eff.value * const(c, "wide_compute_eff")
        t_comp = flops / (self._peak() * eff)
        comm = self._comm_s(tokens, busy * t)
        t = max(t_mem, t_comp) + comm + legacy.layer_overhead_s(m, c)
        return t / serve_efficiency(self.gpu)

    def prefill_iter_s(self, prompts: float, prompt: int) -> float:
        """One prefill iteration of ``prompts`` prompts of ``prompt`` tokens (s)."""
        if self.pp > 1:  # pp prompts in flight at once; one prompt passes every stage
            per = prompts / self.pp if prompts >= self.pp else min(prompts, 1.0)
            return self._stage().prefill_iter_s(per, prompt) + self._p2p_s(per * prompt)
        if self.is_legacy:
            return legacy.prefill_iter_s(
                self.model, self.gpu, self.g, self.precision, prompts, prompt, self.legacy_calib
            )
        m, g, c = self.model, self.g, self.calib
        tokens = prompts * new_tokens(prompt, c)  # less a cached prefix
        if c.prefix is None:
            flops = prompts * (2.0 * compute_params(m) * prompt + prefill_attn_flops(m, prompt)) / g
        else:
            flops = prompts * prefill_flops(m, prompt, c) / g
        eff = c.serve.prefill_compute_eff.value * const(c, "wide_prefill_eff")
        if m.moe is not None:
            eff *= const(c, "moe_prefill_eff")
        comp = flops / (self._peak() * eff)
        r = self.ranks
        new = new_tokens(prompt, c)
        rank_tokens = tokens / r if prompts >= r else min(tokens, float(new))
        share = kv_share_per_gpu(m, self.attn_group)
        # the busiest rank reloads at least one returning prompt's prefix
        reloads = prompts / r if prompts >= r else min(prompts, 1.0)
        t = (
            comp
            + reloads * reload_s(m, self.precision, prompt, share, c)
            + self._weights_read_s(max(prompts, 1) * new_tokens(prompt, c))
            + self._comm_s(tokens, rank_tokens)
            + legacy.layer_overhead_s(m, c)
        )
        return t / serve_efficiency(self.gpu)

    def prefill_rate(self, prompt: int) -> tuple[float, float]:
        """(prompts/s, seconds per iteration) of this worker prefilling full chunks
        (``prefill_chunk_tokens`` per attention rank)."""
        k = max(1.0, math.floor(const(self.calib, "prefill_chunk_tokens") * self.ranks / prompt))
        t = self.prefill_iter_s(k, prompt)
        return k / t, t

    def best_draft(self, n: float, context: float) -> tuple[int, float, float]:
        """(draft tokens, tokens per step, step s) that maximise tokens/s at ``n`` sequences
        (or the fixed ``draft``); without MTP (0, 1, plain step)."""
        best = (0, 1.0, self.decode_step_s(n, context, 0))
        if not self.mtp:
            return best
        measured = draft_acceptance(self.model, self.calib)
        if self.draft:
            drafts: list[int] = [self.draft]
        elif measured is not None:
            drafts = measured.drafts()
        else:
            drafts = list(range(1, int(const(self.calib, "mtp_max_draft")) + 1))
        for d in drafts:
            a = (
                measured.at(d)
                if measured is not None
                else accepted_tokens(d, const(self.calib, "mtp_acceptance"),
                                     const(self.calib, "mtp_acceptance_decay"))
            )  # fmt: skip
            st = self.decode_step_s(n, context, d)
            if self.draft or a / st > best[1] / best[2]:
                best = (d, a, st)
        return best


__all__ = [
    "WorkerPhysics",
    "acceptance_assumed",
    "accepted_tokens",
    "draft_acceptance",
    "allowed_gpus",
    "ep_max_local_experts",
    "gpus_error",
    "mtp_params",
    "scaleup_domain",
    "with_draft_acceptance",
]
