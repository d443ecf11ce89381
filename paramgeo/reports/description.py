"""One-screen summary of a parameterization: dimensions, generic rank, symmetry, quotient."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..geometry.jacobian import generic_rank_decision, orbit_dim
from ..results import Result
from ..io.progress import shows_progress

if TYPE_CHECKING:
    from ..contract.parameterization import Parameterization


@dataclasses.dataclass(frozen=True, kw_only=True)
class Description(Result):
    """Summary of phi: R^n -> R^m.

    quotient_dim = n - (orbit dimension at a generic point), the dimension of Theta / G where the
    action is locally free; ``rank_is_quotient_dim`` says whether phi is generically an immersion
    of the quotient (generic rank == quotient_dim), i.e. G explains all of the redundancy.

    When the plugin declares no symmetry, ``discovered_symmetry`` holds what
    :func:`paramgeo.symmetry.discover` finds (the Lie algebra of linear symmetries: name,
    dimension, orbit dimension) and quotient_dim uses its orbit; it is None when a group is
    declared (``paramgeo check`` compares the two) or n is too large for the linear search.
    """

    name: str
    sizes: dict
    blocks: dict
    param_dim: int
    predictor_shape: tuple
    predictor_dim: int
    generic_rank: int
    symmetry: Optional[dict]
    quotient_dim: int
    rank_is_quotient_dim: bool
    capabilities: tuple
    references: tuple
    discovered_symmetry: object = None
    rank_route: str = "dense"  # dense, closed-form, sparse or matrix-free (paramgeo.linalg.matfree)
    rank_certificate: object = None  # how a matrix-free generic rank was certified
    #: how many of the n - generic rank kernel dimensions the group explains, and the blocks
    #: the unexplained directions move (:func:`paramgeo.critical.completeness`)
    symmetry_explains: Optional[str] = None


@shows_progress("describe")
def describe(param: Parameterization, seed: int = 0, route: str = "auto",
             progress: Any = "auto") -> Description:
    """Describe ``param``: n, m, generic rank (max over random points), symmetry name and
    dimension (declared, else discovered), quotient dimension n - dim(orbit) and whether it
    equals the generic rank. ``route`` chooses how ranks are decided (dense SVD, the plugin's
    closed form, or the matrix-free certificate; see :func:`paramgeo.geometry.rank_at`).
    ``progress(done, total)`` is called after each rank decision and after the symmetry's
    reading, orbit and completeness (the CLI's ``--progress`` bar; True, False, or "auto", the
    default: a display with elapsed time and ETA in an interactive session,
    ``paramgeo.io.progress``)."""
    steps = [0]

    def step(total=7):
        steps[0] += 1
        if progress is not None:
            progress(min(steps[0], total), total)

    decision = generic_rank_decision(param, seed=seed, route=route,
                                     progress=lambda done, total: step())
    rank = decision.rank
    if param.provides("symmetry"):
        group = param.symmetry()
        step()
        theta = param.random_point(np.random.default_rng(seed))
        sym = {"name": group.name, "dim": int(group.dim)}
        quotient = param.n - orbit_dim(param, theta)
        step()
        discovered = None
    else:
        from ..symmetry import MAX_LINEAR_DIM, discover

        sym, quotient, discovered = None, param.n, None
        if param.n <= MAX_LINEAR_DIM:
            found = discover(param, seed=seed, discrete=False)
            discovered = {"name": found.algebra, "dim": int(found.dim),
                          "orbit_dim": int(found.orbit_dim)}
            quotient = param.n - found.orbit_dim
    explains = _explains(param, rank, sym, discovered, quotient, seed)
    while steps[0] < 7:
        step()
    return Description(
        name=param.name,
        sizes=dict(param.sizes),
        blocks={k: list(v) for k, v in param.spec.blocks.items()},
        param_dim=param.n,
        predictor_shape=param.predictor_shape,
        predictor_dim=param.m,
        generic_rank=rank,
        symmetry=sym,
        quotient_dim=int(quotient),
        rank_is_quotient_dim=bool(rank == quotient),
        capabilities=tuple(sorted(param.capabilities)),
        references=tuple(param.references),
        discovered_symmetry=discovered,
        rank_route=decision.route,
        rank_certificate=decision.certificate,
        symmetry_explains=explains,
    )


def _explains(param, rank, sym, discovered, quotient, seed):
    """The completeness line of :class:`Description`: the kernel dimensions n - R against the
    orbit dimension; below ``completeness.MAX_DENSE_N`` parameters measured at a random point
    with the unexplained directions by block."""
    from ..critical.group_completeness import MAX_DENSE_N, Completeness, completeness

    kernel = param.n - rank
    if sym is None and discovered is None:
        return (f"no symmetry group declared or discovered: none of the {kernel} kernel "
                "dimensions is explained")
    if sym is not None and param.n <= MAX_DENSE_N and kernel > param.n - quotient:
        return str(completeness(param, seed=seed, generic_rank=rank))
    return str(Completeness(kernel_dim=kernel, explained=min(param.n - quotient, kernel),
                            unexplained=None, capped=rank >= param.m))
