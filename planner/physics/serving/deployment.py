"""Serving deployments: workers of G GPUs in a mode, aggregated or prefill/decode disaggregated.

A *worker* is one engine instance: ``gpus`` GPUs (G) running the model in one of three modes:

* ``tp``: tensor parallel; a mixture of experts has every expert sliced across the G GPUs;
* ``ep``: tensor-parallel attention, whole experts per GPU (expert parallelism);
* ``dep``: data-parallel attention (each GPU its own sequences and their KV cache), whole
  experts per GPU, the tokens sent to their experts by an all-to-all (SGLang DP attention +
  DeepEP, TensorRT-LLM attention DP + wide EP, vLLM DP + EP).

A *deployment* is ``count`` (W) such workers that do prefill and decode (aggregated), or W_p
prefill workers and W_d decode workers with the KV cache moved from one to the other
(disaggregated), optionally decoding with multi-token prediction (``mtp``). Its label is written
``WxG:mode`` per pool, prefill first: ``4x4:dep+1x32:dep mtp``; an aggregated one ``1x8:tp``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MODES = ("tp", "ep", "dep")
# the widest worker: 4 NVL72 racks or 32 HGX servers joined by the scale-out fabric
MAX_WORKER_GPUS = 288
_SPEC = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*:\s*([A-Za-z]+)\s*$")


@dataclass(frozen=True)
class Worker:
    """``count`` workers of ``gpus`` GPUs each, in ``mode`` (``tp`` | ``ep`` | ``dep``).

    >>> Worker(32, "dep").label()
    '1x32:dep'
    """

    gpus: int
    mode: str
    count: int = 1

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"worker mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not isinstance(self.gpus, int) or self.gpus < 1:
            raise ValueError(f"worker GPUs must be a positive integer, got {self.gpus!r}")
        if not isinstance(self.count, int) or self.count < 1:
            raise ValueError(f"worker count must be a positive integer, got {self.count!r}")

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.count

    def label(self) -> str:
        return f"{self.count}x{self.gpus}:{self.mode}"

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "gpus": self.gpus, "mode": self.mode}


@dataclass(frozen=True)
class Deployment:
    """One serving deployment: ``decode`` workers (aggregated: they prefill too), optional
    ``prefill`` workers (disaggregated), multi-token prediction on or off.

    >>> d = Deployment(Worker(32, "dep"), Worker(4, "dep", 4), mtp=True)
    >>> d.label(), d.total_gpus, d.disaggregated
    ('4x4:dep+1x32:dep mtp', 48, True)
    >>> Deployment.from_label('4x4:dep+1x32:dep mtp') == d
    True
    """

    decode: Worker
    prefill: Worker | None = None
    mtp: bool = False
    # draft tokens per MTP step; None: the count that maximises tokens/s at the batch (engines
    # tune it: 3 at small batch, 1 at large)
    mtp_draft: int | None = None

    def __post_init__(self) -> None:
        if self.mtp_draft is not None and (not self.mtp or not 1 <= self.mtp_draft <= 8):
            raise ValueError(f"mtp_draft must be 1-8 with mtp on, got {self.mtp_draft!r}")

    @property
    def total_gpus(self) -> int:
        return self.decode.total_gpus + (self.prefill.total_gpus if self.prefill else 0)

    @property
    def disaggregated(self) -> bool:
        return self.prefill is not None

    def label(self) -> str:
        pools = [self.decode.label()]
        if self.prefill is not None:
            pools.insert(0, self.prefill.label())
        mtp = f" mtp{self.mtp_draft or ''}" if self.mtp else ""
        return "+".join(pools) + mtp

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label(),
            "disaggregated": self.disaggregated,
            "prefill": None if self.prefill is None else self.prefill.to_dict(),
            "decode": self.decode.to_dict(),
            "mtp": self.mtp,
            "mtp_draft": self.mtp_draft,
            "gpus": self.total_gpus,
        }

    @classmethod
    def from_label(cls, label: str) -> Deployment:
        """The deployment a :meth:`label` names (``ValueError`` if malformed)."""
        text, _, tail = label.strip().partition(" ")
        m = re.fullmatch(r"mtp(\d?)", tail.strip()) if tail.strip() else None
        if tail.strip() and m is None:
            raise ValueError(f"a deployment label ends in ' mtp' or ' mtpN', got {label!r}")
        mtp, draft = m is not None, (int(m.group(1)) if m and m.group(1) else None)
        parts = text.split("+")
        if len(parts) == 1:
            return cls(parse_worker(parts[0]), None, mtp, draft)
        if len(parts) == 2:
            return cls(parse_worker(parts[1]), parse_worker(parts[0]), mtp, draft)
        raise ValueError(f"a deployment label has one or two pools, got {label!r}")


def parse_worker(spec: str, what: str = "worker") -> Worker:
    """``"WxG:MODE"`` -> :class:`Worker` (``ValueError`` naming what is accepted).

    >>> parse_worker("4x4:dep")
    Worker(gpus=4, mode='dep', count=4)
    """
    m = _SPEC.match(spec)
    if m is None:
        raise ValueError(
            f"{what} {spec!r}: write WxG:MODE, W workers of G GPUs in mode "
            f"{'|'.join(MODES)} (e.g. 4x4:dep, 1x32:dep, 2x8:tp)"
        )
    count, gpus, mode = int(m.group(1)), int(m.group(2)), m.group(3).lower()
    if mode not in MODES:
        raise ValueError(f"{what} {spec!r}: mode must be one of {', '.join(MODES)}, got {mode!r}")
    if count < 1 or gpus < 1:
        raise ValueError(f"{what} {spec!r}: W and G must be at least 1")
    if count > 10_000:
        raise ValueError(f"{what} {spec!r}: at most 10,000 workers in one pool")
    return Worker(gpus, mode, count)
