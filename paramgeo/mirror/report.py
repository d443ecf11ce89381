"""One summary of the mirror engine for a parameterization: commuting test, Lie algebra,
conservation laws and the potential (:func:`mirror`, the ``paramgeo mirror`` command).
"""

import dataclasses
from typing import Optional

from ..errors import ParamgeoError
from ..results import Result
from .laws import conservation_laws
from .lie import commuting_test, lie_algebra
from .potentials import mirror_potential


@dataclasses.dataclass(frozen=True)
class MirrorReport(Result):
    """Everything the ``paramgeo mirror`` command shows for one parameterization."""

    name: str
    sizes: dict
    n: int
    m: int
    commuting: bool
    max_bracket: float
    relative_bracket: float
    algebra_dim: int
    algebra_levels: tuple
    n_laws: int
    laws: tuple
    laws_complete: bool
    laws_degree: int
    potential: Optional[str]
    potential_source: Optional[str]
    alpha: Optional[float]
    method: str

    def __str__(self):
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        lines = [
            f"{self.name} ({sizes}): n = {self.n} parameters, m = {self.m} fields grad phi_i",
            f"commuting: {'yes' if self.commuting else 'no'} (largest bracket "
            f"{self.max_bracket:.3g}, relative {self.relative_bracket:.3g}; {self.method})",
            f"generated Lie algebra: dimension {self.algebra_dim} "
            f"(by bracket depth: {', '.join(map(str, self.algebra_levels))})",
            f"conservation laws: {self.n_laws} = n - dim; polynomial of degree <= "
            f"{self.laws_degree}: {len(self.laws)}"
            + ("" if self.laws_complete else " (not a complete set)"),
        ]
        lines += [f"  {law}" for law in self.laws]
        if self.commuting:
            at = f" from init scale alpha = {self.alpha:g}" if self.alpha is not None else ""
            lines.append(f"mirror potential{at} ({self.potential_source}):")
            lines.append(f"  {self.potential}")
        else:
            lines.append("mirror potential: none (the fields do not commute, so gradient flow "
                         "is not a mirror flow for every loss)")
        return "\n".join(lines)


def mirror(param, alpha=None, theta0=None, degree=2, seed=0, policy=None, method="auto"):
    """Commuting test, generated Lie algebra, conservation laws and mirror potential.

    theta0 = ``param.init_at_scale(alpha)`` (alpha defaults to 1) unless given.
    """
    test = commuting_test(param, seed=seed, policy=policy, method=method)
    max_b, rel = test.max_bracket, test.relative
    alg = lie_algebra(param, seed=seed, policy=policy, method=method)
    try:
        laws = conservation_laws(param, degree=degree, seed=seed, policy=policy, method=method,
                                 algebra=alg)
        law_list, complete = laws.laws, laws.complete
    except ParamgeoError as exc:
        law_list, complete = (f"(search skipped: {exc})",), False
    formula = source = None
    if test.commuting:
        if theta0 is None:
            theta0 = param.init_at_scale(1.0 if alpha is None else alpha)
        try:
            pot = mirror_potential(param, theta0, check=False, policy=policy)
            formula, source = pot.formula, pot.source
        except ParamgeoError as exc:
            formula, source = f"none: {exc}", "unavailable"
    return MirrorReport(param.name, dict(param.sizes), param.n, param.m, test.commuting,
                        max_b, rel, alg.dim, alg.levels, alg.n_laws, law_list, complete,
                        degree, formula, source, None if alpha is None else float(alpha),
                        test.method)
