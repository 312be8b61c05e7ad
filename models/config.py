"""ModelConfig: the shape of a delta-rule language model, and the head layout derived from it."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from deltamup.kernels import BACKENDS, CONV_BACKENDS, LOSS_BACKENDS

KINDS = ("deltanet", "gdn", "deltaproduct")
MIN_HEAD_DIM = 4


@dataclass(frozen=True)
class Multipliers:
    """Forward multipliers a parametrization sets (all 1 in SP).

    embedding: on the token embedding's output. readout: on o = scale·Sᵀq before the output (gated) RMSNorm —
    GDN-µP's √d. mixer_output: on the token mixer's output after W_o. logits: on the final logits.
    readout_eps: on the eps of that output RMSNorm (config.norm_eps × readout_eps). RMSNorm(c·o; eps) equals
    RMSNorm(o; eps/c²), so readout c and readout_eps 1/c² are the same model (docs/theory.md). DeltaLM holds the
    first four as 0-d buffers (graph inputs under torch.compile), readout_eps inside the norm's float eps."""

    embedding: float = 1.0
    readout: float = 1.0
    mixer_output: float = 1.0
    logits: float = 1.0
    readout_eps: float = 1.0


@dataclass(frozen=True)
class ModelConfig:
    """kind: deltanet (no decay gate), gdn (Gated DeltaNet) or deltaproduct (n_h = householder micro-steps).

    Head layout (the paper's): `heads` heads, key head dim ≈ key_ratio·width/heads (0.75·d/6), value head dim =
    value_ratio × key head dim, so head dims grow with width and any width works (no divisibility required).
    """

    kind: str = "gdn"
    width: int = 256
    depth: int = 8
    heads: int = 6
    householder: int = 1
    gated: bool | None = None  # None: deltanet → False, gdn/deltaproduct → True
    allow_neg_eigval: bool = False  # β ∈ [0, 2] instead of [0, 1]
    vocab_size: int = 256
    base_width: int = 256
    tie_embeddings: bool = True
    key_ratio: float = 0.75
    value_ratio: float = 2.0
    mlp_ratio: float = 8 / 3  # SwiGLU intermediate = ⌈mlp_ratio·d⌉: the parameters of a 4d two-matrix MLP
    conv_size: int = 4
    norm_eps: float = 1e-6
    kernel_backend: str = "auto"
    conv_backend: str = "torch"  # the short convolutions: kernels.short_conv_silu's "torch" or "triton"
    loss_backend: str = "torch"  # the readout and token loss: kernels.linear_cross_entropy's "torch" or "triton"
    stack_gates: bool = False  # W_β and W_α x as one GEMM over their weights stacked and zero-padded to a multiple
    #                            of 8 rows (each still its own parameter): a 6- or 12-column output is not aligned for
    #                            Hopper's GEMM kernels, and cuBLAS runs those on pre-Hopper ones

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown model kind {self.kind!r}; choose one of {', '.join(KINDS)}")
        if self.kernel_backend not in BACKENDS:
            raise ValueError(f"unknown kernel backend {self.kernel_backend!r}; choose one of {', '.join(BACKENDS)}")
        if self.conv_backend not in CONV_BACKENDS:
            raise ValueError(f"unknown conv backend {self.conv_backend!r}; choose one of {', '.join(CONV_BACKENDS)}")
        if self.loss_backend not in LOSS_BACKENDS:
            raise ValueError(f"unknown loss backend {self.loss_backend!r}; choose one of {', '.join(LOSS_BACKENDS)}")
        if self.kind != "deltaproduct" and self.householder != 1:
            raise ValueError(f"householder={self.householder} needs kind='deltaproduct'")
        if not 1 <= self.householder <= 8:
            raise ValueError(f"householder must be 1…8, got {self.householder}")
        for name in ("width", "depth", "heads", "vocab_size", "base_width", "conv_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name, w in (("width", self.width), ("base_width", self.base_width)):
            dk = self.head_dims_at(w)[0]
            if dk < MIN_HEAD_DIM:
                raise ValueError(f"{name} {w} is too small for {self.heads} heads: key head dim "
                                 f"{self.key_ratio}·{w}/{self.heads} rounds to {dk} < {MIN_HEAD_DIM}")

    def head_dims_at(self, width: int) -> tuple[int, int]:
        dk = max(1, round(self.key_ratio * width / self.heads))
        return dk, max(1, round(self.value_ratio * dk))

    @property
    def is_gated(self) -> bool:
        return self.kind != "deltanet" if self.gated is None else self.gated

    @property
    def head_k_dim(self) -> int:
        return self.head_dims_at(self.width)[0]

    @property
    def head_v_dim(self) -> int:
        return self.head_dims_at(self.width)[1]

    @property
    def mlp_hidden(self) -> int:
        return math.ceil(self.mlp_ratio * self.width)

    @property
    def width_mult(self) -> float:
        """m = width / base_width: the variable every parametrization rule is a function of."""
        return self.width / self.base_width

    def with_width(self, width: int) -> ModelConfig:
        return ModelConfig(**{**asdict(self), "width": width})

    def to_dict(self) -> dict:
        return asdict(self)
