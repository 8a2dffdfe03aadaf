"""Fusion settings: how the dense and sparse legs are combined, the defaults per content kind, and the one a
project adopted.

Why in the engine: the query path reads the setting on every query; choosing one from feedback is quality's job
(search.quality.fusion_choice) and writes the project's ranking (search.engine.project_ranking), which this
module only reads.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from search.engine.project_ranking import fusion_of

if TYPE_CHECKING:
    from projects.models import Project


@dataclass(frozen=True)
class FusionSetting:
    """One way to fuse the legs: RRF with a rank offset and leg weights, or a score fusion with weights."""

    method: str = "rrf"
    rrf_k: int = 60
    dense: float = 1.0
    sparse: float = 1.0

    @property
    def label(self) -> str:
        if self.method == "rrf":
            return f"rrf k={self.rrf_k} dense {self.dense:g} / sparse {self.sparse:g}"
        return f"{self.method} dense {self.dense:g} / sparse {self.sparse:g}"

    def weights(self) -> dict[str, float]:
        return {"dense": self.dense, "sparse": self.sparse}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FusionSetting:
        return cls(method=str(data["method"]), rrf_k=int(data.get("rrf_k", 60)), dense=float(data["dense"]),
                   sparse=float(data["sparse"]))


DEFAULT = FusionSetting()
# Per content kind, chosen on labelled train splits and confirmed on their test splits: on prose (SciFact: 807
# train queries picked it, +0.022 nDCG@10 over RRF on the 300 test queries, bench/results/fusion_scifact.md)
# DBSF with sparse 0.6 / dense 0.4. On code, one collection's train pick lost to RRF on test (fusion_by_kind.md); the
# setting below, picked on two collections' train splits at once, won on both test splits.
PROSE_DEFAULT = FusionSetting("dbsf", 60, 0.4, 0.6)
PROSE_KINDS = frozenset({"web", "beir"})
# On code, min-max weighted fusion with sparse 0.4 / dense 0.6: the one setting with the best mean nDCG@10 over the
# train splits of two code collections at once (Python's standard library and SymPy, docstring -> function); on
# their test splits +0.014 and +0.018 over RRF k=60 (bench/results/fusion_code_two.md, bench/tune_fusion.py).
CODE_DEFAULT = FusionSetting("weighted", 60, 0.6, 0.4)
CODE_KINDS = frozenset({"code"})


def kind_default(kinds: frozenset[str] | set[str]) -> FusionSetting:
    """The default for what a query searches: prose only -> PROSE_DEFAULT; code only -> CODE_DEFAULT; rules or a mix
    of kinds -> RRF k=60 (rank-only fusion needs no agreement between the kinds' score scales)."""
    if kinds and set(kinds) <= PROSE_KINDS:
        return PROSE_DEFAULT
    return CODE_DEFAULT if kinds and set(kinds) <= CODE_KINDS else DEFAULT


def project_setting(project: Project) -> FusionSetting | None:
    """The fusion a project adopted (its ProjectRanking's fusion), or None (the default runs)."""
    data = fusion_of(project).get("setting")
    return FusionSetting.from_dict(data) if data else None
