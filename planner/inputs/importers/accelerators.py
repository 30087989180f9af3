"""SkyPilot accelerator names -> GPU catalog ids, for the offers importer.

Holds :func:`normalize_accelerator` (with its hint patterns), :func:`gcp_host_accelerator`
(the GPUs a GCP host VM family implies) and the GPU catalog ids offers may use
(:func:`known_gpu_ids`, :data:`DEFAULT_GPU_IDS`). :mod:`planner.inputs.importers.offers` is
the importer that uses them.

Accelerator names are mapped to GPU catalog ids by :func:`normalize_accelerator`; the rules:

* Form factor comes from a hint in the accelerator name, the instance type or ``GpuInfo``:
  ``PCI``/``PCIe`` -> PCIe; ``NVL`` (not ``NVLINK``) -> the NVL PCIe variant (H100 NVL, H200
  NVL: not in the catalog, reported unknown); ``SXM``, ``NVLINK``, ``HGX``, ``DGX``, ``MEGA``
  -> SXM. Instance families known to be SXM boards count as a hint: AWS p4d/p4de/p5/p5e/p5en/
  p6, GCP a2-/a3-/a4-, OCI BM.GPU4/BM.GPU.A100/H100/H200/B200.
* Memory comes from the name (``A100-80GB``), the instance type (``80GB``, ``_80G``) or
  ``GpuInfo`` (``SizeInMiB`` >= 65536, or 70..100 when a provider writes GiB). An A100 with no
  memory hint is the 40 GB card.
* ``A100`` (40 GB) -> ``a100-sxm-40gb`` (the only 40 GB A100 in the catalog); with a PCIe hint it
  is reported unknown (``A100-40GB-PCIE``).
* ``A100-80GB`` -> ``a100-pcie-80gb`` with a PCIe hint, ``a100-sxm-80gb`` with an SXM hint.
  ``H100`` (also ``H100-SXM``, ``H100-MEGA``, ``H100-NVLINK``) -> ``h100-pcie`` / ``h100-sxm``
  the same way. With no hint: 8 or more GPUs per instance -> SXM (8-GPU boards are HGX
  boards), fewer -> PCIe. The no-hint cases are counted in ``ImportResult.assumptions``; PCIe
  is the conservative choice (lower bandwidth and FLOPS than the SXM part at the same price).
* ``H200`` -> ``h200-sxm``; ``B200`` -> ``b200``; ``L40S`` -> ``l40s``; ``L4`` -> ``l4``;
  ``A10G`` -> ``a10g``; ``RTX4090``/``RTX-4090``/``RTX 4090`` -> ``rtx-4090``; ``RTX3090`` ->
  ``rtx-3090``.
* Anything else (T4, V100, A10, A6000, L40, MI300X, TPUs, ...) is reported in
  ``ImportResult.unknown`` (name -> number of instance types skipped), never dropped silently;
  so is a mapped id that the GPU catalog does not hold.
"""

from __future__ import annotations

import re
from pathlib import Path

from planner.inputs.catalog import CATALOG_DIR

#: GPU ids of the catalog when ``catalogs/gpus.yaml`` cannot be read.
DEFAULT_GPU_IDS = frozenset(
    {
        "h100-sxm", "h100-pcie", "h200-sxm", "a100-sxm-80gb", "a100-pcie-80gb", "a100-sxm-40gb",
        "rtx-4090", "rtx-3090", "l40s", "l4", "a10g", "b200",
    }
)  # fmt: skip


_NVL_ONLY = re.compile(r"NVL(?!INK)")
_SXM_HINT = re.compile(r"SXM|NVLINK|HGX|DGX|MEGA")
_SXM_FAMILIES = re.compile(
    r"^(p4d|p4de|p5|p5e|p5en|p6-b\d+)\.|^a[234]-(high|mega|ultra|edge)gpu-|^BM\.GPU(4|\.A100|\.H100|\.H200|\.B200)",
    re.IGNORECASE,
)
_BASE = re.compile(
    r"(A100|H100|H200|B200|RTX4090|RTX3090|L40S|L4|A10G)((?:SXM\d?|PCIE|MEGA|NVLINK|NVL|\d+GB?)*)"
)
_MIB = re.compile(r"SIZEINMIB'?\"?\s*:\s*(\d{1,12})(?!\d)")


def _form_factor(text: str, instance_type: str) -> str | None:
    """``pcie``, ``nvl``, ``sxm`` or None from the hint text (upper case) and instance type."""
    if _NVL_ONLY.search(text):  # H100 NVL / H200 NVL: PCIe cards, other memory and bandwidth
        return "nvl"
    if "PCI" in text:
        return "pcie"
    if _SXM_HINT.search(text) or _SXM_FAMILIES.search(instance_type or ""):
        return "sxm"
    return None


def _memory_80(text: str, key: str) -> bool:
    if re.search(r"80GB?|94GB?", key) or re.search(r"(?<!\d)80\s?GB?(?![A-Z0-9])|81920", text):
        return True
    for mib in _MIB.findall(text):
        n = int(mib)
        if n >= 65536 or 70 <= n <= 100:
            return True
    return False


def _tpu_family(name: str) -> str:
    m = re.match(r"(tpu-v\d+[a-z]*)", name, re.IGNORECASE)
    return m.group(1).lower() if m else name


#: Accelerators with one catalog id whatever the form-factor and memory hints.
_SIMPLE_IDS = {
    "B200": "b200",
    "RTX4090": "rtx-4090",
    "RTX3090": "rtx-3090",
    "L40S": "l40s",
    "L4": "l4",
    "A10G": "a10g",
}


def _unknown_label(raw: str) -> str:
    """The name an unmapped accelerator is reported under (TPUs by family, not by slice)."""
    return _tpu_family(raw) if raw.lower().startswith("tpu") else raw or "(empty)"


def _form_or_assumed(
    base: str, text: str, instance_type: str, count: int
) -> tuple[str, bool, str | None]:
    """``(form, hinted, assumption)``: the hinted form factor, else one assumed from the count.

    8 or more GPUs per instance are an HGX board (SXM); fewer are taken as PCIe, the
    conservative choice (less bandwidth and FLOPS than the SXM part at the same price).
    """
    form = _form_factor(text, instance_type)
    if form is not None:
        return form, True, None
    form = "sxm" if count >= 8 else "pcie"
    many = ">= 8" if count >= 8 else "< 8"
    return form, False, f"{base} without form-factor hint, {many} GPUs: assumed {form.upper()}"


def _a100_id(
    form: str, hinted: bool, assumed: str | None, memory_80: bool
) -> tuple[str | None, str | None]:
    """:func:`normalize_accelerator` for an A100 (40 GB unless a memory hint says 80)."""
    if memory_80:
        if form == "nvl":
            return None, "A100-80GB-NVL"
        return ("a100-pcie-80gb" if form == "pcie" else "a100-sxm-80gb"), assumed
    if hinted and form == "pcie":
        return None, "A100-40GB-PCIE"
    # only one 40 GB A100 in the catalog: no assumption needed when no hint is given
    return "a100-sxm-40gb", None


def normalize_accelerator(
    name: str, count: int = 1, instance_type: str = "", gpu_info: str = ""
) -> tuple[str | None, str | None]:
    """Map a SkyPilot accelerator to a GPU catalog id (module docstring has the rules).

    Returns ``(gpu_id, assumption)``; ``assumption`` names the no-hint rule when one was used.
    When the accelerator is not mapped, returns ``(None, label)`` with the name to report.

    >>> normalize_accelerator("A100-80GB", 8, "p4de.24xlarge")
    ('a100-sxm-80gb', None)
    >>> normalize_accelerator("A100", 1, "epyc-genoa-a100-pcie_1x4v8gb", "{'MemoryInfo': {'SizeInMiB': 81920}}")
    ('a100-pcie-80gb', None)
    >>> normalize_accelerator("H100", 8, "hyperstack_H100x8")
    ('h100-sxm', 'H100 without form-factor hint, >= 8 GPUs: assumed SXM')
    >>> normalize_accelerator("H100", 1, "gpu_1x_h100_pcie")
    ('h100-pcie', None)
    >>> normalize_accelerator("RTX-4090", 2)
    ('rtx-4090', None)
    >>> normalize_accelerator("H100", 1, "1x-H100_NVL-32-65536")
    (None, 'H100-NVL')
    >>> normalize_accelerator("T4", 1)
    (None, 'T4')
    """
    raw = (name or "").strip()
    m = _BASE.fullmatch(re.sub(r"[\s_\-]+", "", raw.upper()))
    if not m:
        return None, _unknown_label(raw)
    base, suffix = m.group(1), m.group(2)
    text = f"{raw} {instance_type} {gpu_info}".upper()
    form, hinted, assumed = _form_or_assumed(base, text, instance_type, count)
    if base == "A100":
        return _a100_id(form, hinted, assumed, _memory_80(text, suffix))
    if base == "H100":
        if form == "nvl":
            return None, "H100-NVL"
        return ("h100-pcie" if form == "pcie" else "h100-sxm"), assumed
    if base == "H200":
        if hinted and form in ("nvl", "pcie"):
            return None, "H200-NVL"
        return "h200-sxm", None
    if suffix and not re.fullmatch(r"\d+GB?", suffix):
        return None, raw
    return _SIMPLE_IDS[base], None


def known_gpu_ids(gpus_path: str | Path | None = None) -> frozenset[str]:
    """Ids of the GPU catalog (``catalogs/gpus.yaml``), or :data:`DEFAULT_GPU_IDS` if absent."""
    from planner.inputs.catalog import load_gpus

    p = Path(gpus_path) if gpus_path else CATALOG_DIR / "gpus.yaml"
    if not p.exists():
        return DEFAULT_GPU_IDS
    return frozenset(load_gpus(p))


# GCP host VM families and the accelerators attached to them (host rows carry no GPU columns).
_GCP_HOSTS: list[tuple[re.Pattern, str]] = [
    (re.compile(r"^a2-(?:high|mega)gpu-([1-9]\d{0,3})g$"), "A100"),
    (re.compile(r"^a2-ultragpu-([1-9]\d{0,3})g$"), "A100-80GB"),
    (re.compile(r"^a3-(?:high|edge)gpu-([1-9]\d{0,3})g(?:-.*)?$"), "H100"),
    (re.compile(r"^a3-megagpu-([1-9]\d{0,3})g$"), "H100-MEGA"),
    (re.compile(r"^a3-ultragpu-([1-9]\d{0,3})g$"), "H200"),
    (re.compile(r"^a4-highgpu-([1-9]\d{0,3})g$"), "B200"),
]
_GCP_G2 = {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}


def gcp_host_accelerator(instance_type: str) -> tuple[str, int] | None:
    """Accelerator name and count of a GCP GPU host VM, or None for other VMs.

    >>> gcp_host_accelerator("a3-highgpu-8g")
    ('H100', 8)
    >>> gcp_host_accelerator("g2-standard-24")
    ('L4', 2)
    >>> gcp_host_accelerator("n2-standard-8") is None
    True
    """
    for rx, acc in _GCP_HOSTS:
        m = rx.match(instance_type)
        if m:
            return acc, int(m.group(1))
    m = re.match(r"^g2-standard-([1-9]\d{0,3})$", instance_type)
    if m and int(m.group(1)) in _GCP_G2:
        return "L4", _GCP_G2[int(m.group(1))]
    return None
