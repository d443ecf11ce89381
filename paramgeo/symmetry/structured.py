"""Structured discovery: symmetries of units that no layer rule covers, from the contract alone.

A computational graph tells which parameter slices belong to one *unit* (an output feature of a
layer with its weights, biases and the next layer's columns that read it); the unit's positions
fall into *slots*, one per parameter slice (a weight row, a bias entry, a consumer column). The
search looks for affine vector fields acting inside one unit,

    X(theta)[slot a] = sum_b c_ab theta[slot b]   (slots a, b of equal size)
                       + d_a                      (slots of size 1: translations),

with J(theta) X(theta) = 0 at random points: a linear system in the unknowns (c, d), whose
number is the square of the unit's slot count, not n^2 as in the unstructured search of
:func:`paramgeo.symmetry.discover`. The null space, decided by the tolerance policy, gives the
unit's Lie algebra of such fields (rescalings of a unit between its producer and its consumer,
moves of one slot into another, translations of biases). The condition is that of Kunin et al.
(2021, "Neural mechanics") restricted to the ansatz; every field found is verified again as a
group (:func:`paramgeo.symmetry.verify_group`) before it is declared.

Units of one layer usually carry the same pattern of coefficients: the pattern found on a unit
is tried on the next one first (one verification), and solved afresh only where it fails.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import numpy as np

from ..linalg.numerics import null_basis, policy_of, rational_rref
from .actions import FieldGroup

if TYPE_CHECKING:
    from ..contract.parameterization import Parameterization
    from ..linalg.numerics import RankPolicy


def _basis(slots, n):
    """The ansatz of one unit: (kind, a, b) for c_ab (equal sizes) and (const, a) for d_a."""
    out = []
    for a, sa in enumerate(slots):
        for b, sb in enumerate(slots):
            if len(sa) == len(sb):
                out.append(("lin", a, b))
        if len(sa) == 1:
            out.append(("const", a, None))
    return out


def _field_value(term, slots, theta, n):
    kind, a, b = term
    v = np.zeros(n)
    v[slots[a]] = theta[slots[b]] if kind == "lin" else 1.0
    return v


def _fields(coef, basis, slots, n, label):
    """(A, c, label) of :class:`FieldGroup` for coefficients ``coef`` on ``basis``."""
    import scipy.sparse as sp

    rows, cols, vals = [], [], []
    c = np.zeros(n)
    for x, (kind, a, b) in zip(coef, basis):
        if abs(x) < 1e-12:
            continue
        if kind == "lin":
            rows.extend(slots[a])
            cols.extend(slots[b])
            vals.extend([x] * len(slots[a]))
        else:
            c[slots[a]] += x
    A = sp.csr_matrix((vals, (rows, cols)), shape=(n, n)) if vals else None
    return A, (c if np.any(c) else None), label


def structured_discovery(param: Parameterization, units: Sequence[tuple[Any, ...]],
                         n_points: int = 3, seed: int = 0, policy: Optional[RankPolicy] = None,
                         progress: Optional[Callable[[int, int], None]] = None) -> FieldGroup:
    """The fields of each unit (see the module docstring). ``units`` is a list of
    (label, slots[, slot names]) with slots a list of integer index arrays (the unit's
    positions, one array per slot, the same slot layout for every unit of a layer). Returns a
    :class:`FieldGroup` (dimension 0 when nothing is found) whose ``labels`` name the unit of
    each field; ``progress(done, total)`` is called after each unit."""
    from ..linalg.numerics import as_rng
    from .verify import verify_group

    policy = policy_of(param, policy)
    rng = as_rng(seed)
    n = param.n
    points = [param.random_point(rng) for _ in range(n_points)]
    fields, pattern = [], None
    for k, unit in enumerate(units):
        label, slots = unit[0], unit[1]
        slot_names = unit[2] if len(unit) > 2 else [f"slot {a}" for a in range(len(slots))]
        slots = [np.asarray(s, dtype=int).ravel() for s in slots]
        basis = _basis(slots, n)
        found = None
        if pattern is not None and len(pattern[0]) == len(basis):
            trial = [_fields(c, basis, slots, n, f"{label}: {name}") for c, name in
                     zip(pattern[0], pattern[1])]
            if trial and verify_group(param, FieldGroup(trial, n), points=points[:1],
                                      n_elements=1).passed:
                found = trial
        if found is None:
            M = np.vstack([np.stack([param.jvp(theta, _field_value(t, slots, theta, n))
                                     for t in basis], axis=1) for theta in points])
            scale = np.linalg.norm(M, axis=0)
            scale[scale == 0] = 1.0
            # the triangular factor of M has M's singular values and right vectors, at the
            # size of the ansatz (M itself has points x m rows)
            R = np.linalg.qr(M / scale, mode="r")
            null = null_basis(R, policy, f"structured discovery of {label}", warn=False)[0]
            # the RREF of the null space (unique, small rationals snapped): the same basis on
            # every unit of a layer, so that the pattern transfers
            rows = rational_rref((null / scale[:, None]).T) if null.size else []
            coefs = [np.array([float(x) for x in row]) for row in rows]
            names = [_describe(c, basis, slot_names) for c in coefs]
            found = [_fields(c, basis, slots, n, f"{label}: {name}")
                     for c, name in zip(coefs, names)]
            pattern = (coefs, names)
        fields.extend(found)
        if progress is not None:
            progress(k + 1, len(units))
    return FieldGroup(fields, n, name=f"R^{len(fields)}" if fields else "1")


def _describe(coef, basis, names):
    """A field in words: "0.u row x c, 1 column x 1/c" for a rescaling (a field with
    coefficients +1 and -1 on its slots), else its terms "d(a) = x b" and "d(a) = x"."""
    diag = {a: x for x, (kind, a, b) in zip(coef, basis) if x != 0 and kind == "lin" and a == b}
    rest = [(x, kind, a, b) for x, (kind, a, b) in zip(coef, basis)
            if x != 0 and not (kind == "lin" and a == b)]
    if not rest and diag and all(abs(x) == 1 for x in diag.values()):
        return ", ".join(f"{names[a]} x {'c' if x > 0 else '1/c'}" for a, x in diag.items())
    terms = [f"d({names[a]}) = {x:+.3g} {names[a]}" for a, x in diag.items()]
    terms += [f"d({names[a]}) = {x:+.3g}" + ("" if kind == "const" else f" {names[b]}")
              for x, kind, a, b in rest]
    return "; ".join(terms)
