"""Model architectures: the shape of a transformer the physics needs (catalogs/models.yaml)."""

from __future__ import annotations

from pydantic import Field

from planner.inputs.strict import Strict


class ModelArch(Strict):
    id: str
    name: str
    # Bounds: a million parameters to 100 trillion; shapes of any published transformer.
    params: float = Field(gt=1e6, le=1e14, description="total parameters")
    layers: int = Field(gt=0, le=1000)
    hidden: int = Field(gt=0, le=1_000_000)
    heads: int = Field(gt=0, le=10_000)
    kv_heads: int = Field(gt=0, le=10_000)
    intermediate: int = Field(gt=0, le=10_000_000, description="MLP inner size")
    vocab: int = Field(gt=0, le=10_000_000)
    max_context: int = Field(gt=0, le=100_000_000)
    source: str
    as_of: str

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads
