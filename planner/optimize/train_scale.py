"""Physically meaningless training scale: more data-parallel replicas than sequences.

A data-parallel replica needs at least one sequence of its own per optimizer step. With more
replicas than sequences in the whole run, some GPUs never see a token: the estimate's
throughput per GPU (and so its MFU and GPU-hours) describes GPUs with nothing to do
(``estimate train --gpus 1000000 --tokens 1e6``: 244 sequences, 46 % MFU, 0 GPU-hours). That is
refused (``estimate train``); training candidates lay each size out with at most one replica per
sequence (:func:`replica_cap`), so a tiny job runs on the few GPUs that hold one copy of the
model (a 1-token 13B job: 4 H100s as TP 4) instead of on none. More replicas than sequences in
one step's global batch is possible only with a larger batch than the recipe's, which changes
the optimization: ``estimate train`` warns.
"""

from __future__ import annotations

from planner.physics.calibration.values import Calibration
from planner.physics.train import TrainEstimate


def run_sequences(tokens: float, seq_len: int) -> float:
    """Sequences of ``seq_len`` tokens in a run of ``tokens`` tokens (the last one partial).

    >>> run_sequences(1e6, 4096)
    245.0
    """
    return float(-(-tokens // seq_len))


def replica_cap(tokens: float, seq_len: int, gpus: int) -> int | None:
    """The most data-parallel replicas a run of ``tokens`` tokens can feed on ``gpus`` GPUs (one
    sequence each), or None when it has a sequence for every GPU (no layout can idle one).

    >>> replica_cap(1, 4096, 8), replica_cap(1e6, 4096, 8)
    (1, None)
    """
    seqs = run_sequences(tokens, seq_len)
    return int(seqs) if seqs < gpus else None


def idle_replicas(est: TrainEstimate, tokens: float, seq_len: int) -> str | None:
    """Why ``est`` is meaningless (more data-parallel replicas than the run has sequences),
    or None when every replica has data."""
    if est.layout is None:
        return None
    dp, seqs = est.layout.dp, run_sequences(tokens, seq_len)
    if dp <= seqs:
        return None
    per_replica = est.gpus // dp  # GPUs of one replica (TP x PP)
    return (
        f"{est.gpus:,} GPUs train as {dp:,} data-parallel replicas (TP {est.layout.tp} x "
        f"PP {est.layout.pp} each), but {tokens:,.0f} tokens are only {seqs:,.0f} sequences of "
        f"{seq_len:,}: {dp - seqs:,.0f} replicas would never see a token. At most "
        f"{int(seqs) * per_replica:,} GPUs do useful work"
    )


def batch_tokens(tokens: float, method: str, calib: Calibration) -> float:
    """The global batch (tokens per step) :func:`planner.physics.train.estimate_train` plans."""
    if method != "full":
        return calib.train.finetune_global_batch_tokens.value
    try:  # the physics' rule where it has one: longer runs take larger batches
        from planner.physics.training.estimate import pretrain_batch_tokens
    except ImportError:  # the physics without it plans the calibrated batch for every run
        return calib.train.global_batch_tokens.value
    return pretrain_batch_tokens(tokens, calib)


def short_run_batch(tokens: float, seq_len: int, method: str, calib: Calibration) -> float | None:
    """The global batch (tokens) of a run shorter than the recipe's batch: the whole run, in
    whole sequences (a 1-token run takes one step on one sequence, so no micro-batch of 2);
    None for a run of at least one batch, which steps with the recipe's.

    >>> from planner.physics.calibration.values import default_calibration
    >>> cal = default_calibration()
    >>> short_run_batch(1, 4096, "full", cal), short_run_batch(1e12, 4096, "full", cal)
    (4096.0, None)
    """
    whole = run_sequences(tokens, seq_len) * seq_len
    return whole if whole < batch_tokens(tokens, method, calib) else None


def thin_batch(est: TrainEstimate, gbs_tokens: float, seq_len: int) -> str | None:
    """A warning when a step's global batch has fewer sequences than data-parallel replicas
    (the run needs a batch of ``dp`` sequences at least, larger than the recipe's)."""
    if est.layout is None:
        return None
    per_step = gbs_tokens / seq_len
    if est.layout.dp <= per_step:
        return None
    return (
        f"{est.layout.dp:,} data-parallel replicas but a global batch of {gbs_tokens:,.0f} "
        f"tokens holds {per_step:,.0f} sequences of {seq_len:,}: each step needs at least "
        f"{est.layout.dp:,} sequences, a {est.layout.dp / per_step:,.1f}x larger batch than "
        "the recipe's, which training at this scale may not tolerate"
    )
