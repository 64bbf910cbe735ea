"""The seed paper's published figures, with their sources, for the report's comparisons.

Das, Kwon, Chauhan, Mascolo, "Enabling On-Device Smartphone GPU based Training: Lessons
Learned", PerCom Workshops 2022, pp. 533-538, DOI 10.1109/PerComWorkshops53856.2022.9767442,
arXiv 2202.10100. Each :class:`Anchor` names its ``source``: the paper's abstract, or, marked
``second_hand``, third-party reading notes on the paper or published clpeak results for the
phones' GPUs; the report labels second-hand figures so.
"""

from __future__ import annotations

from dataclasses import dataclass

CITATION = ("Das, Kwon, Chauhan, Mascolo. Enabling On-Device Smartphone GPU based Training: "
            "Lessons Learned. PerCom Workshops 2022 (arXiv 2202.10100)")


@dataclass(frozen=True)
class Anchor:
    """One published figure: what it says, its value(s), and where it comes from."""

    key: str
    text: str
    low: float | None = None
    high: float | None = None
    unit: str = ""
    second_hand: bool = False
    source: str = "paper abstract"

    @property
    def label(self) -> str:
        """The figure's text with its provenance mark: ``<text> [<source>]``, the source prefixed
    ``second-hand: `` when ``second_hand``."""
        return f"{self.text} [{'second-hand: ' if self.second_hand else ''}{self.source}]"


ANCHORS = {a.key: a for a in [
    Anchor("gpu_gemm_before", "GPU GEMM before optimization: 5 / 10 / 15 GFLOPS on OnePlus "
           "Nord / 6 / 8 Pro (Adreno 620 / 630 / 650)", 5, 15, "GFLOPS", True,
           "third-party reading notes"),
    Anchor("gpu_gemm_after", "GPU GEMM after optimization: 25 / 40 / 70 GFLOPS on OnePlus "
           "Nord / 6 / 8 Pro", 25, 70, "GFLOPS", True, "third-party reading notes"),
    Anchor("gpu_gemm_gain", "GPU GEMM gain from kernel optimization: 25/5, 40/10, 70/15 "
           "GFLOPS, i.e. 4-5x on OnePlus Nord / 6 / 8 Pro (derived from the two figures "
           "above)", 4, 5, "x", True, "third-party reading notes"),
    Anchor("gpu_opt_abstract", "optimized OpenCL kernels reach 40-70 GFLOPS on Snapdragon "
           "8-series", 40, 70, "GFLOPS"),
    Anchor("cpu_gflops", "CPU reaches 15-30 GFLOPS", 15, 30, "GFLOPS"),
    Anchor("movement_share", "data movement takes ~91% of GPU training time", 0.91, 0.91,
           "share"),
    Anchor("gpu_slowdown", "GPU training >= ~10x slower than CPU, the ratio shrinking as the "
           "network grows", 10, None, "x", True, "third-party reading notes"),
    Anchor("copy_vs_compute", "copies took ~10-15x longer than compute", 10, 15, "x", True,
           "third-party reading notes"),
    Anchor("phone_transfer", "phone host<->GPU copies (clpeak): Adreno 730 write 13.7, read "
           "15.1 GB/s, map zero-copy; Mali-G76 MP10 write 6.8, read 8.2, map 16.5 GB/s",
           6.8, 16.5, "GB/s", True,
           "published clpeak results for those GPUs (second-hand), not the paper"),
]}
