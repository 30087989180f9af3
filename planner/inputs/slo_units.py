"""Latency targets that look like seconds: ``p95_tpot_ms: 0.04`` is 40 ms written in seconds.

Below a floor no hardware reaches, a target is refused (exit 2); above it but below what
serving systems publish, it is planned with a warning. Both say what was probably meant.

Floors: a p95 time per output token of 0.1 ms is 10,000 tokens/s to one user, 4x the fastest
published single-stream decode (~2,500 tokens/s, Cerebras, 2025); a p95 time to first token of
1 ms is less than a datacenter network round trip plus one forward pass. Warnings: below 1 ms
per token (1,000 tokens/s per user) or 10 ms to the first token, values no GPU serving
system publishes at p95, while 0.02-0.2 s per token and 0.2-10 s to the first token are
common targets written in seconds.
"""

from __future__ import annotations

FLOOR_MS = {"p95_tpot_ms": 0.1, "p95_ttft_ms": 1.0}
PLAUSIBLE_MS = {"p95_tpot_ms": 1.0, "p95_ttft_ms": 10.0}


def _meant(ms: float) -> str:
    """The hint: ``ms`` read as seconds.

    >>> _meant(0.04)
    'the value looks like seconds: did you mean 40 ms?'
    """
    return f"the value looks like seconds: did you mean {ms * 1000:,.6g} ms?"


def check_floor(field: str, ms: float) -> float:
    """``ms`` if some hardware could reach it, else a ValueError with the hint."""
    floor = FLOOR_MS[field]
    if ms < floor:
        raise ValueError(
            f"{ms:g} ms is below {floor:g} ms, faster than any hardware serves one user; "
            + _meant(ms)
        )
    return ms


def unit_warning(where: str, field: str, ms: float) -> str | None:
    """A warning for a target no serving system publishes (``where``: the workload), or None."""
    if ms >= PLAUSIBLE_MS[field]:
        return None
    return (
        f"{where}: slo.{field} {ms:g} ms is below {PLAUSIBLE_MS[field]:g} ms, a target no "
        f"serving system publishes; {_meant(ms)}"
    )
