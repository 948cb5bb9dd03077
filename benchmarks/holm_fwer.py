"""Family-wise error of the confirmatory atlas's verdicts, by simulation (issue 34).

A confirmatory family of K claims, each tested in both directions (grpo_research.analysis.atlas:
`p_claim` at the claim's bound, `p_contra` at its negation's), on G new base models with one seed
each; Holm over the 2K p-values (`stats.holm`), a verdict when an adjusted p <= 0.025. Every claim
sits on the boundary of one of its hypotheses, the worst case for the error rate: claims 0, 2, ...
have a true mean difference of exactly 0 (a "reproduced" would be false), claims 1, 3, ... of
exactly delta (a "contradicted" would be false). The claims are dependent: on each base, the K
differences share a common normal component with correlation `rho` (claims that share an arm, or
a base model's quirks, move together), and the noise is normal or heavy-tailed (t with 3 df,
scaled to unit SD). Printed per cell: the share of families with at least one false verdict
(nominal: at most 2.5 %) under Holm, under Benjamini-Hochberg within each direction (the
exploratory phase's procedure) and unadjusted, with their Monte-Carlo standard errors.

    python benchmarks/holm_fwer.py [--reps 20000] [--seed 0] [--bases 8 12] [--claims 2 4 6]
"""
from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from grpo_research.analysis.stats import ALPHA, benjamini_hochberg, holm, p_above, p_below


def family_errors(K: int, G: int, rho: float, noise: str, reps: int, rng: np.random.Generator,
                  delta: float = 1.0, sd: float = 1.0) -> dict[str, float]:
    """Share of `reps` families of K `greater` claims with at least one false verdict, by procedure."""
    truth = np.array([0.0 if j % 2 == 0 else delta for j in range(K)])

    def draw(size):
        if noise == "normal":
            return rng.standard_normal(size)
        return rng.standard_t(3, size) / math.sqrt(3.0)  # unit variance

    common = draw((reps, G, 1))
    own = draw((reps, G, K))
    d = truth + sd * (math.sqrt(rho) * common + math.sqrt(1.0 - rho) * own)  # (reps, G, K)
    false = {"holm": 0, "bh": 0, "unadjusted": 0}
    from scipy.stats import t as student_t

    mean, se = d.mean(axis=1), d.std(axis=1, ddof=1) / math.sqrt(G)  # (reps, K): one seed per base
    PC = student_t.sf((mean - 0.0) / se, G - 1)  # p_above(d, 0): the claim, mean > 0
    PN = student_t.cdf((mean - delta) / se, G - 1)  # p_below(d, delta): its negation, mean < delta
    assert np.allclose(PC[0], [p_above(d[0, :, j], 0.0) for j in range(K)])  # the atlas's own tests
    assert np.allclose(PN[0], [p_below(d[0, :, j], delta) for j in range(K)])
    wrong_claim, wrong_contra = truth <= 0.0, truth >= delta  # false "reproduced" / "contradicted"
    for r in range(reps):
        pc, pn = PC[r].tolist(), PN[r].tolist()
        adj = holm(pc + pn)
        for name, (ac, an) in (("holm", (adj[:K], adj[K:])), ("bh", (benjamini_hochberg(pc), benjamini_hochberg(pn))),
                               ("unadjusted", (pc, pn))):
            ac, an = np.asarray(ac), np.asarray(an)
            reproduced = ac <= ALPHA
            contradicted = (an <= ALPHA) & ~reproduced  # atlas._verdict: the claim's test first
            if (reproduced & wrong_claim).any() or (contradicted & wrong_contra).any():
                false[name] += 1
    return {k: v / reps for k, v in false.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bases", type=int, nargs="+", default=[8, 12])
    ap.add_argument("--claims", type=int, nargs="+", default=[2, 4, 6])
    ap.add_argument("--rho", type=float, nargs="+", default=[0.0, 0.5, 0.9])
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    print(f"# families with at least one false verdict (nominal <= {100 * ALPHA:.1f} %), {a.reps} families per cell; "
          "claims alternate between a true difference of 0 and of delta")
    for noise in ("normal", "t3"):
        for G in a.bases:
            for K in a.claims:
                for rho in a.rho:
                    rates = family_errors(K, G, rho, noise, a.reps, rng)
                    cells = "  ".join(f"{name} {100 * p:5.2f} % +- {100 * math.sqrt(p * (1 - p) / a.reps):.2f}"
                                      for name, p in rates.items())
                    print(f"{noise:>6}  bases={G:<3} claims={K}  rho={rho:.1f}  {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
