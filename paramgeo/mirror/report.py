"""One summary of the mirror engine for a parameterization: commuting test, Lie algebra,
conservation laws and the potential (:func:`mirror`, the ``paramgeo mirror`` command).
"""

import dataclasses
from typing import Optional

from ..errors import ParamgeoError
from ..results import Result, title
from ..io.progress import shows_progress
from .laws import conservation_laws
from .lie import MIRROR_BUDGET, commuting_test, lie_algebra
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
    #: "polynomial" (laws found by the polynomial search, printed expanded) or "matrix" (the
    #: laws of the GL(r) factors of the declared symmetry, printed as matrices)
    laws_form: str = "polynomial"
    algebra_method: str = ""
    #: False when the algebra was not computed to the end (the budget stopped it): then
    #: ``algebra_dim`` is a lower bound and ``n_laws`` an upper bound
    algebra_stabilised: bool = True
    #: True when Ctrl-C (KeyboardInterrupt) stopped the computation: what is shown was
    #: finished (the algebra a lower bound), the rest was skipped
    interrupted: bool = False

    def __str__(self):
        lines = [
            f"{title(self.name, self.sizes)}: n = {self.n} parameters, m = {self.m} fields grad phi_i",
            f"commuting: {'yes' if self.commuting else 'no'} (largest bracket "
            f"{self.max_bracket:.3g}, relative {self.relative_bracket:.3g}; {self.method})",
            f"generated Lie algebra: dimension {'' if self.algebra_stabilised else '>= '}"
            f"{self.algebra_dim} "
            f"(by bracket depth: {', '.join(map(str, self.algebra_levels))}"
            + (f"; {self.algebra_method}" if self.algebra_method else "") + ")",
        ]
        if self.laws_form == "matrix":
            count = (f"{self.n_laws} = n - dim" if self.algebra_stabilised else
                     f"at most {self.n_laws} = n - {self.algebra_dim} (completeness not certified)")
            lines.append(f"conservation laws: {count}; in matrix form (every entry conserved), "
                         "from the GL factors of the symmetry"
                         + ("" if self.laws_complete or not self.algebra_stabilised
                            else " (not a complete set)") + ":")
        else:
            lines.append(f"conservation laws: {self.n_laws} = n - dim; polynomial of degree <= "
                         f"{self.laws_degree}: {len(self.laws)}"
                         + ("" if self.laws_complete else " (not a complete set)"))
        lines += [f"  {law}" for law in self.laws]
        if self.commuting:
            at = f" from init scale alpha = {self.alpha:g}" if self.alpha is not None else ""
            lines.append(f"mirror potential{at} ({self.potential_source}):")
            lines.append(f"  {self.potential}")
        else:
            lines.append("mirror potential: none (the fields do not commute, so gradient flow "
                         "is not a mirror flow for every loss)")
        if self.interrupted:
            lines.append("INTERRUPTED (Ctrl-C): the parts above were finished, the rest skipped")
        return "\n".join(lines)


@shows_progress("mirror (Lie algebra)")
def mirror(param, alpha=None, theta0=None, degree=2, seed=0, policy=None, method="auto",
           budget=MIRROR_BUDGET, progress="auto"):
    """Commuting test, generated Lie algebra, conservation laws and mirror potential.

    theta0 = ``param.init_at_scale(alpha)`` (alpha defaults to 1) unless given. When the
    declared symmetry is made of GL(r) factors the laws are its matrix laws
    (:func:`paramgeo.symmetry.conserved.matrix_laws`, e.g. U^T U - V^T V, W_i W_i^T - W_{i+1}^T W_{i+1};
    Marcotte, Gribonval, Peyre 2023; Arora, Cohen, Hazan 2018), their count of independent
    entries (the rank of their gradients at a random point) bounds the algebra, and the
    polynomial search is skipped, and a Lie algebra stopped by the budget is reported as a lower
    bound (completeness of the laws then not certified). ``progress``: a callable
    ``progress(done, total)``, True, False, or "auto" (the default: a display with elapsed time
    and ETA in an interactive session; ``paramgeo.io.progress``). ``budget`` and ``progress`` go to
    :func:`lie_algebra` (otherwise a :class:`paramgeo.errors.BudgetError` when its estimate
    exceeds the budget). A KeyboardInterrupt (Ctrl-C) after the commuting test returns what
    was finished, ``interrupted`` True: the algebra levels done (a lower bound), the laws and
    the potential only if they were reached.
    """
    from ..contract.arguments import number, parameterization

    parameterization(param)
    if alpha is not None:
        alpha = number(alpha, "alpha (the initialisation scale)", positive=True)
    test = commuting_test(param, seed=seed, policy=policy, method=method)
    max_b, rel = test.max_bracket, test.relative
    matrix = _matrix_laws(param, seed, policy)
    if matrix is not None:
        cq, independent = matrix
        # the laws are known without the algebra: past the budget it stops with a lower bound
        alg = lie_algebra(param, seed=seed, policy=policy, method=method,
                          bound=param.n - independent, budget=budget, progress=progress,
                          partial=True)
        law_list = tuple(f"{law}  ({law.r} x {law.r} symmetric: {law.r * (law.r + 1) // 2} "
                         "entries)" for law in cq.laws)
        complete, form = independent == alg.n_laws, "matrix"
    else:
        alg = lie_algebra(param, seed=seed, policy=policy, method=method, budget=budget,
                          progress=progress)
        form = "polynomial"
        law_list, complete = ("(search skipped: interrupted)",), False
        try:
            if not alg.interrupted:
                laws = conservation_laws(param, degree=degree, seed=seed, policy=policy,
                                         method=method, algebra=alg)
                law_list, complete = laws.laws, laws.complete
        except ParamgeoError as exc:
            law_list, complete = (f"(search skipped: {exc})",), False
        except KeyboardInterrupt:  # Ctrl-C: the algebra is finished, the laws are not
            law_list, alg = ("(search interrupted)",), dataclasses.replace(alg, interrupted=True)
    interrupted = alg.interrupted
    formula = source = None
    if test.commuting:
        formula, source = "none: interrupted", "interrupted"
        if theta0 is None:
            theta0 = param.init_at_scale(1.0 if alpha is None else alpha)
        try:
            if not interrupted:
                pot = mirror_potential(param, theta0, check=False, policy=policy)
                formula, source = pot.formula, pot.source
        except ParamgeoError as exc:
            formula, source = f"none: {exc}", "unavailable"
        except KeyboardInterrupt:
            interrupted = True
    return MirrorReport(param.name, dict(param.sizes), param.n, param.m, test.commuting,
                        max_b, rel, alg.dim, alg.levels, alg.n_laws, law_list, complete,
                        degree, formula, source, None if alpha is None else float(alpha),
                        test.method, form, alg.method, alg.stabilised, interrupted)


def _matrix_laws(param, seed, policy):
    """(conserved quantities, number of independent ones) when the declared symmetry gives
    matrix laws, else None; independence is the rank of the gradients 2 S_c theta at a random
    point."""
    import numpy as np

    from ..symmetry.conserved import conserved_quantities
    from ..linalg.numerics import as_rng, decide_rank

    if not param.provides("symmetry"):
        return None
    cq = conserved_quantities(param)
    if not cq.laws:
        return None
    theta = param.random_point(as_rng(seed + 11 if isinstance(seed, int) else seed))
    grads = np.stack([np.asarray(S @ theta).ravel() for S in cq.matrices])
    return cq, decide_rank(grads, policy, warn=False).rank
