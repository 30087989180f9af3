"""Each GPU vendor's software efficiency, relative to NVIDIA's, applied to the physics.

The calibration (``catalogs/calibration.yaml``) is fitted to NVIDIA runs; on another vendor's
card the same kernels, collectives and serving engines reach a different share of the silicon.
``catalogs/vendors.yaml`` holds that share per vendor from MLPerf Training and Inference
(AMD: 0.72 training, 0.81 serving; NVIDIA: 1.0, the reference), and the GPU loader puts it on
each :class:`~planner.inputs.catalog.GpuSpec` (``train_efficiency``, ``serve_efficiency``), where
a problem file can override it (``overrides.gpus.<id>.serve_efficiency``).

* Training: ``MFU = MFU_nvidia-physics x train_efficiency`` (dimensionless), applied once per GPU
  in :func:`planner.physics.train.single_gpu_mfu`, so compute time scales by its inverse and the
  communication does not.
* Serving: every step of a replica (a decode step, a prefill iteration) takes
  ``t_nvidia-physics / serve_efficiency`` seconds, so a replica's decode and prefill tokens/s
  scale by the factor at a given batch.

A GPU built without the loader (a test's hand-made spec) takes its vendor's figure from the
shipped ``catalogs/vendors.yaml``. At 1.0 (NVIDIA) every product is unchanged bit for bit.
"""

from __future__ import annotations

import functools
from typing import Literal

from planner.inputs.catalog import GpuSpec, SourcedRange, VendorSpec, check_efficiency, load_vendors

Kind = Literal["train", "serve"]


@functools.cache
def _shipped_vendors() -> dict[str, VendorSpec]:
    """The shipped ``catalogs/vendors.yaml``, loaded once."""
    return load_vendors()


def vendor_figure(gpu: GpuSpec, kind: Kind) -> SourcedRange:
    """The GPU's ``train`` or ``serve`` efficiency relative to NVIDIA, with its source: the
    figure on the spec (catalog or problem override), else its vendor's in catalogs/vendors.yaml.

    >>> from planner.physics.train import _toy_gpu
    >>> vendor_figure(_toy_gpu(), "serve").value
    1.0
    """
    own = gpu.train_efficiency if kind == "train" else gpu.serve_efficiency
    if kind == "serve":
        gen = _generation_figure(gpu, own)
        if gen is not None:
            return gen
    if own is not None:
        return own
    vendors = _shipped_vendors()
    if gpu.vendor not in vendors:
        raise ValueError(f"gpu {gpu.id!r}: vendor {gpu.vendor!r} is not in catalogs/vendors.yaml")
    v = vendors[gpu.vendor]
    return v.train_efficiency if kind == "train" else v.serve_efficiency


def _generation_figure(gpu: GpuSpec, own: SourcedRange | None) -> SourcedRange | None:
    """The GPU generation's serving figure (``serve.serve_efficiency_by_gpu`` in
    catalogs/calibration.yaml) where one vendor figure does not fit its generations (AMD: CDNA 3
    MI300X/MI325X vs CDNA 4 MI355X); None when the GPU has none or a problem file overrides the
    vendor's figure (an override always wins)."""
    from planner.physics.calibration.values import default_calibration

    by = dict(default_calibration().serve.serve_efficiency_by_gpu or ())
    gen = by.get(gpu.id)
    if gen is None or gpu.vendor == "nvidia":  # NVIDIA is the reference the physics is fitted to
        return None
    vendor = _shipped_vendors().get(gpu.vendor)
    if own is not None and (vendor is None or own != vendor.serve_efficiency):
        return None  # a problem file's override
    low = min(gen.value, vendor.serve_efficiency.low) if vendor else gen.value
    high = max(gen.value, vendor.serve_efficiency.high) if vendor else gen.value
    return SourcedRange(
        value=gen.value, low=low, high=high, source=gen.source, as_of=gen.as_of, note=gen.note
    )


def train_efficiency(gpu: GpuSpec) -> float:
    """Factor on the predicted MFU of ``gpu`` (dimensionless, in (0, 2]; NVIDIA 1.0).

    >>> from planner.physics.train import _toy_gpu
    >>> amd = _toy_gpu().model_copy(update={"vendor": "amd"})
    >>> train_efficiency(_toy_gpu()), train_efficiency(amd)
    (1.0, 0.72)
    """
    return check_efficiency(vendor_figure(gpu, "train").value)


def serve_efficiency(gpu: GpuSpec) -> float:
    """Factor on a replica's serving tokens/s on ``gpu`` (dimensionless, in (0, 2]; NVIDIA 1.0).

    >>> from planner.physics.train import _toy_gpu
    >>> serve_efficiency(_toy_gpu().model_copy(update={"vendor": "amd"}))
    0.81
    """
    return check_efficiency(vendor_figure(gpu, "serve").value)


def serve_step_s(seconds: float, gpu: GpuSpec) -> float:
    """A serving step's time on ``gpu``: ``seconds / serve_efficiency`` (s).

    >>> from planner.physics.train import _toy_gpu
    >>> serve_step_s(0.02, _toy_gpu())  # NVIDIA: unchanged
    0.02
    >>> round(serve_step_s(0.0162, _toy_gpu().model_copy(update={"vendor": "amd"})), 6)
    0.02
    """
    return seconds / serve_efficiency(gpu)


def describe(gpu: GpuSpec, kind: Kind) -> dict[str, object]:
    """The figure as the CLI and the plan show it: vendor, value, range, source, as_of.

    >>> from planner.physics.train import _toy_gpu
    >>> d = describe(_toy_gpu().model_copy(update={"vendor": "amd"}), "train")
    >>> d["vendor"], d["value"], d["low"], d["high"]
    ('amd', 0.72, 0.63, 0.82)
    """
    f = vendor_figure(gpu, kind)
    return {
        "vendor": gpu.vendor,
        "value": f.value,
        "low": f.low,
        "high": f.high,
        "source": f.source if f.note is None else f"{f.source}; {f.note}",
        "as_of": f.as_of,
    }
