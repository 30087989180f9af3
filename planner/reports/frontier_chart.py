"""The serving frontier as a PNG (``planner estimate frontier --chart``): one line per GPU
type, tokens/s per user across, output tokens/s per GPU up on a log scale.

Drawn with matplotlib, an optional extra (``pip install 'gpu-planner[plot]'``); without it
:func:`require_matplotlib` raises an :class:`~planner.base.errors.InputError` (exit 2) saying
so. The workbook's Frontier sheet needs no matplotlib (an openpyxl chart,
:mod:`planner.reports.excel.frontier_sheet`).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from planner.analysis.frontier import GpuFrontier
from planner.base.errors import InputError

INSTALL_HINT = "pip install 'gpu-planner[plot]'"
_COLORS = ("#1F4E79", "#C55A11", "#548235", "#7030A0", "#BF8F00", "#2F5597", "#A50021")


def require_matplotlib() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend, or exit 2 with the install
    command."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError(
            f"--chart draws with matplotlib, which is not installed: {INSTALL_HINT}"
        ) from None
    return plt


def frontier_png(fronts: Mapping[str, GpuFrontier], title: str, dpi: int = 150) -> bytes:
    """The PNG of ``fronts``: each GPU's frontier as a line with its points marked (a GPU
    that cannot serve is named in the legend, with no line)."""
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=dpi)
    try:
        for k, (gid, f) in enumerate(fronts.items()):
            color = _COLORS[k % len(_COLORS)]
            if not f.points:
                ax.plot([], [], color=color, label=f"{gid}: cannot serve")
                continue
            xs = [p.tokens_per_s_per_user for p in f.points]
            ys = [p.tokens_per_s_per_gpu for p in f.points]
            ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.6, color=color,
                    label=f"{gid} ({f.precision})", drawstyle="default")  # fmt: skip
        ax.set_yscale("log")
        ax.set_xlabel("tokens/s per user (1000 / TPOT ms)")
        ax.set_ylabel("output tokens/s per GPU (log)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    return buf.getvalue()
