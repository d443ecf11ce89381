"""One summary of the mirror engine for a parameterization: commuting test, Lie algebra,
conservation laws and the potential (:func:`mirror`, the ``paramgeo mirror`` command).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Optional, Union

from ..errors import ParamgeoError
from ..results import Result, title
from ..io.progress import shows_progress
from .laws import conservation_laws
from .lie import MIRROR_BUDGET, commuting_test, lie_algebra
from .potentials import mirror_potential

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..linalg.numerics import RankPolicy
    from ..contract.parameterization import Parameterization


@dataclasses.dataclass(frozen=True, kw_only=True)
class MirrorReport(Result):
    """Everything the ``paramgeo mirror`` command shows for one parameterization.

    Attributes:
        name: the plugin's name.
        sizes: its sizes.
        n: the parameter dimension.
        m: the number of fields grad phi_i.
        commuting: whether every bracket [grad phi_i, grad phi_j] vanishes.
        max_bracket: the largest bracket norm over the test points.
        relative_bracket: max_bracket over the scale of the terms DX_j X_i.
        algebra_dim: the dimension of the generated Lie algebra (a lower bound when not
            ``algebra_stabilised``).
        algebra_levels: its dimension after each bracket level.
        n_laws: n - algebra_dim, the number of independent conservation laws.
        laws: the laws found (expanded polynomials, or matrices of the GL(r) factors).
        laws_complete: whether the laws found are all n_laws of them.
        laws_degree: the largest degree searched.
        potential: the mirror potential R, in words, or None.
        potential_source: "closed form" (the plugin's), "numerical", or None.
        alpha: the initialisation scale of theta0, or None when theta0 was given.
        method: how the brackets were decided ("symbolic" or "numeric").
        laws_form: "polynomial" (the polynomial search) or "matrix" (the GL(r) factors' laws).
        algebra_method: how the algebra was computed.
        algebra_stabilised: False when the budget stopped the algebra (dim a lower bound).
        interrupted: Ctrl-C stopped the computation; what is shown was finished.
    """

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
    laws_form: str = "polynomial"
    algebra_method: str = ""
    algebra_stabilised: bool = True
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
def mirror(param: Parameterization, alpha: Optional[float] = None,
           theta0: Optional[ArrayLike] = None, degree: int = 2, seed: int = 0,
           policy: Optional[RankPolicy] = None, method: str = "auto",
           budget: float = MIRROR_BUDGET,
           progress: Union[bool, str, Callable[[int, int], None], None] = "auto"
           ) -> MirrorReport:
    """Commuting test, generated Lie algebra, conservation laws and mirror potential of phi.

    Gradient flow d theta / dt = -J^T grad ell(phi) is a mirror flow d grad R(beta) / dt =
    -grad ell(beta) on beta = phi(theta) for every loss iff the fields grad phi_i commute
    ([grad phi_i, grad phi_j] = 0; Li, Wang, Lee, Arora 2022, "Implicit bias of gradient
    descent on reparametrized models"); the Lie algebra they generate bounds the number of
    conserved quantities n - dim Lie (Marcotte, Gribonval, Peyre 2023). With a declared
    symmetry of GL(r) factors the laws are its matrix laws (U^T U - V^T V; Arora, Cohen, Hazan
    2018) and the polynomial search is skipped. The potential R is the plugin's closed form or
    one built numerically (docs/mirror.md).

    Args:
        param: the parameterization phi: R^n -> R^m.
        alpha: the initialisation scale, theta0 = ``param.init_at_scale(alpha)``; default 1.
        theta0: the initialisation itself, shape (n,), instead of alpha.
        degree: the largest degree of the polynomial conservation laws searched.
        seed: seed of the random points of the tests.
        policy: the tolerance policy of the rank decisions; None: the default.
        method: "auto", "symbolic" or "numeric" brackets (:func:`commuting_test`).
        budget: seconds the Lie algebra may take (estimated before it starts).
        progress: a callable progress(done, total) called while the algebra is built; True,
            False, or "auto" (a display with elapsed time and ETA in an interactive session;
            :mod:`paramgeo.io.progress`).

    Returns:
        The :class:`MirrorReport`. A Ctrl-C after the commuting test returns what was finished,
        with ``interrupted`` True (the algebra then a lower bound).

    Raises:
        BudgetError: the algebra's estimated time exceeds ``budget`` (without matrix laws).
        ArgumentError: a bad alpha, or ``param`` not a Parameterization.

    Examples:
        >>> import paramgeo
        >>> from paramgeo.mirror import mirror
        >>> report = mirror(paramgeo.get("hadamard", p=2))      # phi(u, v) = u * v
        >>> report.commuting, report.laws                        # u_i^2 - v_i^2 conserved
        (True, ('u_0**2 - v_0**2', 'u_1**2 - v_1**2'))
    """
    from ..contract.arguments import number, parameterization

    parameterization(param)
    if alpha is not None:
        alpha = number(alpha, "alpha (the initialisation scale)", positive=True)
    report = progress if callable(progress) else None  # the decorator gave a callable or None
    test = commuting_test(param, seed=seed, policy=policy, method=method)
    max_b, rel = test.max_bracket, test.relative
    matrix = _matrix_laws(param, seed, policy)
    if matrix is not None:
        cq, independent = matrix
        # the laws are known without the algebra: past the budget it stops with a lower bound
        alg = lie_algebra(param, seed=seed, policy=policy, method=method,
                          bound=param.n - independent, budget=budget, progress=report,
                          partial=True)
        law_list = tuple(f"{law}  ({law.r} x {law.r} symmetric: {law.r * (law.r + 1) // 2} "
                         "entries)" for law in cq.laws)
        complete, form = independent == alg.n_laws, "matrix"
    else:
        alg = lie_algebra(param, seed=seed, policy=policy, method=method, budget=budget,
                          progress=report)
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
    return MirrorReport(name=param.name, sizes=dict(param.sizes), n=param.n, m=param.m,
                        commuting=test.commuting, max_bracket=max_b, relative_bracket=rel,
                        algebra_dim=alg.dim, algebra_levels=alg.levels, n_laws=alg.n_laws,
                        laws=law_list, laws_complete=complete, laws_degree=degree,
                        potential=formula, potential_source=source,
                        alpha=None if alpha is None else float(alpha), method=test.method,
                        laws_form=form, algebra_method=alg.method,
                        algebra_stabilised=alg.stabilised, interrupted=interrupted)


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
