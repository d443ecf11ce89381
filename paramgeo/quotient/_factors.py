"""The solvers of :func:`paramgeo.quotient.align`, one per kind of group factor (orthogonal
Procrustes, general linear least squares, scaling tori, unit permutations by linear assignment,
sign flips, enumeration of small finite groups); the methods and references are in
:mod:`paramgeo.quotient.alignment`'s docstring.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ParamgeoError
from ..symmetry import (FieldGroup, GeneralLinearGroup, OrthogonalGroup, ScalingTorus,
                       ShearGroup, SignedPermutationGroup, UnitPermutationGroup, block_matrix)

if TYPE_CHECKING:
    from numpy.typing import NDArray

#: group sizes up to which a finite group without unit structure is enumerated
MAX_ENUMERATED = 5040
#: sign-flip generators up to which overlapping flips are enumerated (2^k elements)
MAX_ENUMERATED_FLIPS = 12
#: condition number above which a GL element is refused: acting with g costs about
#: cond(g) * 2.2e-16 relative accuracy, and far above this g . theta leaves the orbit (a
#: rank-deficient block regains rank while phi barely moves)
MAX_COND = 1e6


def well_conditioned(g: NDArray[np.float64]) -> bool:
    """Whether the matrix ``g`` is invertible with condition number at most ``MAX_COND``."""
    return bool(np.all(np.isfinite(g))) and np.linalg.cond(g) <= MAX_COND


def _procrustes(group, x, z):
    M = sum((block_matrix(z, b).T @ block_matrix(x, b) for b in group.right),
            np.zeros((group.r, group.r)))
    P, _, Qt = np.linalg.svd(M)
    R = P @ Qt
    return R, group.act(R, z), True, "orthogonal Procrustes (polar factor, reflections included)"


def _stack(theta, blocks):
    return np.vstack([block_matrix(theta, b) for b in blocks]) if blocks else None


def _least_squares_element(group, A, Y, side):
    """argmin_h |Y - A h| over all r x r h (linear least squares); ParamgeoError when it is
    singular, so that the infimum over GL(r) is not attained."""
    h = np.linalg.lstsq(A, Y, rcond=None)[0]
    if np.linalg.matrix_rank(h) < group.r:
        raise ParamgeoError(f"{group.name}: the least-squares alignment of the {side} blocks is "
                            "singular (the infimum over GL is not attained); align points whose "
                            "blocks have full column rank")
    return h


def _general_linear(group, x, z):
    """min_g |B_x - B_z g|^2 + |K_x - K_z g^{-T}|^2; (g, aligned, exact, method)."""
    from scipy.optimize import least_squares

    r = group.r
    Bx, Bz = _stack(x, group.right), _stack(z, group.right)
    Kx, Kz = _stack(x, group.contragredient), _stack(z, group.contragredient)
    if Kx is None:
        g = _least_squares_element(group, Bz, Bx, "right")
        return g, group.act(g, z), True, "linear least squares (right blocks only)"
    if Bx is None:  # K_z h ~ K_x with h = g^{-T}
        g = np.linalg.inv(_least_squares_element(group, Kz, Kx, "contragredient")).T
        return g, group.act(g, z), True, "linear least squares (contragredient blocks only)"
    starts = [np.eye(r)]
    for A, Y, invert in ((Kz, Kx, True), (Bz, Bx, False)):
        h = np.linalg.lstsq(A, Y, rcond=None)[0]
        if np.linalg.matrix_rank(h) == r and well_conditioned(h):
            starts.append(np.linalg.inv(h).T if invert else h)

    def residual(vec):
        g = vec.reshape(r, r)
        if not well_conditioned(g):  # singular or too ill-conditioned to act with
            return np.full(Bx.size + Kx.size, 1e150)
        gi = np.linalg.inv(g)
        return np.concatenate([(Bz @ g - Bx).ravel(), (Kz @ gi.T - Kx).ravel()])

    top = np.kron(Bz, np.eye(r))  # d(B g)[i, l] / dg[a, b] = B[i, a] delta(l, b)

    def jac(vec):
        C = np.linalg.inv(vec.reshape(r, r)).T
        # d(K g^{-T}) = -K g^{-T} dg^T g^{-T}: entry (i, l), (a, b) is -(K g^{-T})[i, b] C[a, l]
        bottom = -np.einsum("ib,al->ilab", Kz @ C, C).reshape(-1, r * r)
        return np.vstack([top, bottom])

    best = None
    for g0 in starts:
        sol = least_squares(residual, g0.ravel(), jac=jac, method="lm", xtol=1e-15,
                            ftol=1e-15, gtol=1e-15, max_nfev=200 * r * r)
        if best is None or sol.cost < best.cost:
            best = sol
    g = best.x.reshape(r, r)
    return g, group.act(g, z), False, (f"Levenberg-Marquardt on gl(r) from {len(starts)} "
                                       "starts")


def _gl_lower_bound_sq(group, x, z):
    """Decoupled bound min_g |B_x - B_z g|^2 + min_h |K_x - K_z h|^2 <= the GL objective."""
    total = 0.0
    for blocks in (group.right, group.contragredient):
        if blocks:
            A, Y = _stack(z, blocks), _stack(x, blocks)
            total += float(np.sum((A @ np.linalg.lstsq(A, Y, rcond=None)[0] - Y) ** 2))
    return total


def _best_scale(xs, zs, e, signed):
    """argmin over c > 0 (c != 0 if signed) of sum_j (x_j - z_j c^{e_j})^2, from the real roots
    of c^{-lo} f'(c) (a polynomial); c = 1 when no term depends on c."""
    keep = (zs != 0) & (e != 0)
    if not np.any(keep):
        return 1.0
    xs, zs, e = xs[keep], zs[keep], e[keep]
    # f'(c)/(-2) = sum e x z c^{e-1} - e z^2 c^{2e-1}
    powers = np.concatenate([e - 1, 2 * e - 1])
    coeffs = np.concatenate([e * xs * zs, -e * zs ** 2])
    lo = powers.min()
    poly = np.zeros(powers.max() - lo + 1)
    np.add.at(poly, powers - lo, coeffs)
    roots = np.roots(poly[::-1])
    real = roots[np.abs(roots.imag) <= 1e-9 * np.maximum(1.0, np.abs(roots))].real
    cands = [c for c in real if (c > 0 or (signed and c < 0))] + [1.0]

    def f(c):
        return float(np.sum((xs - zs * np.sign(c) ** (e % 2) * np.abs(c) ** e.astype(float))
                            ** 2))

    return min(cands, key=f)


def _torus(group, x, z, max_sweeps=200, tol=1e-13):
    E = group.exponents
    k = E.shape[0]
    c = np.ones(k)
    supports = [np.flatnonzero(E[i]) for i in range(k)]
    separable = _disjoint(supports)
    cur = np.array(z, float)
    prev = np.sum((x - cur) ** 2)
    for _ in range(1 if separable else max_sweeps):
        for i, s in enumerate(supports):
            if s.size == 0:
                continue
            e = E[i, s]
            ci = _best_scale(x[s], cur[s], e, group.signed)
            if ci != 1.0:
                cur[s] = cur[s] * np.sign(ci) ** (e % 2) * np.abs(ci) ** e.astype(float)
                c[i] *= ci
        now = np.sum((x - cur) ** 2)
        if prev - now <= tol * max(prev, 1e-300):
            break
        prev = now
    return c, group.act(c, z), separable, (
        "per-unit rescaling, global 1-D minimum in each (separable)" if separable else
        "coordinate descent over the rescalings (global 1-D minimum per step)")


def _disjoint(position_sets):
    """Whether no position appears twice among the sets (integer arrays of any shape; a set
    that repeats a position counts as overlapping itself, which only costs exactness)."""
    arrays = [np.asarray(p, dtype=np.int64).ravel() for p in position_sets]
    both = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
    return both.size == 0 or int(np.bincount(both).max()) <= 1


def _assignment():
    """scipy.optimize.linear_sum_assignment, imported on first use (scipy.optimize loads its
    submodules lazily, and an import statement per call costs as much as a small assignment)."""
    global _LSA
    if _LSA is None:
        from scipy.optimize import linear_sum_assignment as _LSA
    return _LSA


_LSA = None
#: per tuple of unit classes (held by its group): (disjoint, classes sharing positions)
_STRUCTURE: dict = {}


def _class_structure(classes, n):
    """Whether the unit classes share no position (then one assignment each is exact), and for
    each class the other classes that share positions with it; computed once per ``classes``
    tuple (a group's, kept while the group lives)."""
    key = id(classes)
    hit = _STRUCTURE.get(key)
    if hit is not None and hit[0] is classes:
        return hit[1:]
    owned = np.zeros((len(classes), n), dtype=bool)
    for c, (_, index) in enumerate(classes):
        owned[c, index] = True
    touches = [[d for d, (_, ix) in enumerate(classes) if d != c and owned[c].take(ix).any()]
               for c in range(len(classes))]
    exact = _disjoint([index for _, index in classes])
    if len(_STRUCTURE) > 64:
        _STRUCTURE.clear()
    _STRUCTURE[key] = (classes, exact, touches)
    return exact, touches


def _match_classes(classes, x, z, act_one, max_sweeps=100):
    """Weight matching: one linear assignment per class in order, repeated until no class
    changes. ``act_one(c, step, theta)`` permutes the units of class ``c`` alone by ``step``
    (unit i takes the parameters of unit step[i]), in place when it can, and returns theta.
    A class is solved again only after a class sharing positions with it has moved: after its
    own optimal step its matrix only has its columns permuted, so the identity is optimal and
    the assignment would change nothing. Returns (perms, aligned, exact)."""
    linear_sum_assignment = _assignment()
    perms = [np.arange(len(index)) for _, index in classes]
    cur = np.array(z, float)
    exact, touches = _class_structure(classes, x.size)
    fixed = [x.take(index) for _, index in classes]  # theta1's units, read once
    stale = [len(index) > 1 for _, index in classes]
    for _ in range(1 if exact else max_sweeps):
        changed = False
        for c, (_, index) in enumerate(classes):
            if not stale[c]:
                continue
            stale[c] = False
            C = fixed[c] @ cur.take(index).T  # C[i, j] = <x unit i, z unit j>
            step = linear_sum_assignment(C, maximize=True)[1]  # rows are 0..k-1 in order
            now = C.trace()
            if C[np.arange(len(step)), step].sum() - now <= 1e-12 * (abs(now) + 1e-300):
                continue  # no strict improvement: keep the current assignment
            cur = act_one(c, step, cur)
            perms[c] = perms[c][step]  # units of different classes commute
            for d in touches[c]:
                stale[d] = len(classes[d][1]) > 1
            changed = True
        if not changed:
            break
    return perms, cur, exact


def _units(group, x, z):
    def act_one(c, step, theta):
        label, index = group.classes[c]
        if label in group.adjust:  # fixed state to rewrite: through the group's action
            one = [np.arange(len(ix)) for _, ix in group.classes]
            one[c] = step
            return group.act(tuple(one), theta)
        theta[index] = theta.take(index[step])  # in place: the right side is a copy
        return theta

    perms, aligned, exact = _match_classes(group.classes, x, z, act_one)
    return tuple(perms), aligned, exact, "linear assignment per unit class" + (
        "" if exact else ", class after class until none changes (weight matching)")


def _signed_generators(group):
    """The generators (perm, signs) the group was built from (its constructor argument)."""
    return group._gens


def _unit_classes_of(group):
    """The unit classes of a signed permutation group generated by swaps of equal-sized blocks
    of positions (each generator an involution with signs +1), as (label, index) pairs with
    index (units, positions), or None when the generators are not of that form. The classes
    are checked: every generator must swap two units of one class position by position."""
    gens = _signed_generators(group)
    n = group.n
    ident = np.arange(n)
    if not gens or any(np.any(s != 1) or np.any(p[p] != ident) for p, s in gens):
        return None
    moved = [np.flatnonzero(p != ident) for p, _ in gens]
    signature = {}
    for k, m in enumerate(moved):
        for pos in m.tolist():
            signature.setdefault(pos, set()).add(k)
    units = {}
    for pos, sig in signature.items():
        units.setdefault(frozenset(sig), []).append(pos)
    units = [np.array(sorted(u)) for u in units.values()]
    # a generator seen by one candidate unit only: split its pairs (p, perm p) into two units
    split = []
    for u in units:
        ks = {k for k in signature[int(u[0])]}
        owners = [k for k in ks if sum(k in signature[int(v[0])] for v in units) == 1]
        if len(ks) == 1 and owners:
            p = gens[owners[0]][0]
            if set(p[u].tolist()) == set(u.tolist()):
                a = np.array(sorted(q for q in u.tolist() if q < p[q]))
                split += [a, p[a]]
                continue
        split.append(u)
    units = split
    owner = {}
    for i, u in enumerate(units):
        for pos in u.tolist():
            owner[pos] = i
    edges = []
    for k, (p, _) in enumerate(gens):
        touched = sorted({owner[q] for q in moved[k].tolist()})
        if len(touched) != 2:
            return None
        edges.append((touched[0], touched[1], p))
    # order each unit's positions from a root by following the swaps; then check every swap
    order = {}
    adj = {}
    for a, b, p in edges:
        adj.setdefault(a, []).append((b, p))
        adj.setdefault(b, []).append((a, p))
    classes = []
    for root in range(len(units)):
        if root in order:
            continue
        order[root] = units[root]
        queue, members = [root], [root]
        while queue:
            a = queue.pop()
            for b, p in adj.get(a, []):
                if b not in order:
                    order[b] = p[order[a]]
                    members.append(b)
                    queue.append(b)
        classes.append(sorted(members))
    for a, b, p in edges:
        if order[a].shape != order[b].shape or np.any(p[order[a]] != order[b]) or \
                set(order[b].tolist()) != set(units[b].tolist()):
            return None
    return [(f"units {members}", np.stack([order[i] for i in members]))
            for members in classes if len(members) > 1]


def _perm_of_units(n, classes, perms):
    P = np.arange(n)
    for (_, index), pi in zip(classes, perms):
        P[index] = index[pi]
    return P


def _signed_permutations(group, x, z):
    gens = _signed_generators(group)
    n = group.n
    ident = np.arange(n)
    if all(np.all(p == ident) for p, _ in gens):  # sign flips
        flips = [np.flatnonzero(s < 0) for _, s in gens]
        if _disjoint(flips):
            signs = np.ones(n)
            for f in flips:
                if np.dot(x[f], z[f]) < 0:
                    signs[f] = -1.0
            el = (ident, signs)
            return el, group.act(el, z), True, "sign flips, one per generator (disjoint)"
        if len(gens) <= MAX_ENUMERATED_FLIPS:
            best = None
            for mask in itertools.product((0, 1), repeat=len(gens)):
                signs = np.prod([s for s, m in zip((s for _, s in gens), mask) if m] or
                                [np.ones(n)], axis=0)
                d = np.sum((x - signs * z) ** 2)
                if best is None or d < best[0]:
                    best = (d, signs)
            el = (ident, best[1])
            return el, group.act(el, z), True, f"enumeration of 2^{len(gens)} sign patterns"
    classes = _unit_classes_of(group)
    if classes is not None:
        def act_one(c, step, t):
            one = [np.arange(len(ix)) for _, ix in classes]
            one[c] = step
            return t[_perm_of_units(n, classes, one)]

        perms, _, exact = _match_classes(classes, x, z, act_one)
        el = (_perm_of_units(n, classes, perms), np.ones(n))
        return el, group.act(el, z), exact, "linear assignment per unit class (units read " \
                                            "from the swap generators)"
    elements = _enumerate(group)
    best = min(elements, key=lambda el: np.sum((x - group.act(el, z)) ** 2))
    return best, group.act(best, z), True, f"enumeration of the {len(elements)} elements"


def _enumerate(group):
    gens = _signed_generators(group)
    n = group.n
    start = (tuple(range(n)), tuple([1.0] * n))
    seen = {start}
    frontier = [start]
    while frontier:
        nxt = []
        for perm, signs in frontier:
            perm, signs = np.array(perm), np.array(signs)
            for p, s in gens:
                el = (tuple(perm[p].tolist()), tuple((s * signs[p]).tolist()))
                if el not in seen:
                    seen.add(el)
                    nxt.append(el)
                    if len(seen) > MAX_ENUMERATED:
                        raise ParamgeoError(
                            f"{group.name}: a finite group of more than {MAX_ENUMERATED} "
                            "elements without unit structure has no exact aligner; declare "
                            "its units as a paramgeo.symmetry.UnitPermutationGroup")
        frontier = nxt
    return [(np.array(p), np.array(s)) for p, s in seen]


def _shears(group, x, z):
    """min_t |x - z - F t|, F = the shear directions at z, constant along the orbit (they read
    only coordinates no shear moves): the orbit is the affine space z + range F, so linear
    least squares is the global minimum."""
    F = group.generators(z)
    t = np.linalg.lstsq(F, x - z, rcond=None)[0]
    return t, group.act(t, z), True, "linear least squares along the shear directions"


def _augmented(group):
    """The (n+1) x (n+1) matrices [[A_k, c_k], [0, 0]] of the affine fields (sparse)."""
    import scipy.sparse as sp

    n = group.n
    return [sp.bmat([[A, sp.csr_matrix(c[:, None])], [None, sp.csr_matrix((1, 1))]],
                    format="csr") for A, c in zip(group._A, group._c)]


#: augmented sizes n + 1 up to which the field exponentials are dense (scipy.linalg.expm and
#: expm_frechet); above it the sparse block exponential (expm_multiply) is faster
#: (benchmarks/bench_fields.py: at n = 42 dense is about 2 times faster, at n = 82 sparse, at
#: n = 302 sparse 30 times)
MAX_DENSE_FIELDS = 64


def _fields(group, x, z):
    """min_t |x - exp(sum t_k X_k) . z| over the coefficients t of the affine fields X_k
    (the group's own elements), by Levenberg-Marquardt from t = 0 with the exact Jacobian:
    d/dt_k exp(M) z~ = L(M, A~_k) z~, L the Frechet derivative of the exponential (Higham
    2008, "Functions of matrices", ch. 10; scipy.linalg.expm_frechet, or for large n the top
    block of exp([[M, A~_k], [0, M]]) (0, z~)), M = sum t_k A~_k acting on z~ = (z, 1). A local
    method (not exact)."""
    import scipy.sparse as sp
    from scipy.linalg import expm, expm_frechet
    from scipy.optimize import least_squares
    from scipy.sparse.linalg import expm_multiply

    n, k = group.n, group.dim
    mats = _augmented(group)
    zt = np.append(np.asarray(z, float), 1.0)
    dense = n + 1 <= MAX_DENSE_FIELDS
    if dense:
        mats = [Ak.toarray() for Ak in mats]

    def M(t):
        return sum((tk * Ak for tk, Ak in zip(t, mats)),
                   np.zeros((n + 1, n + 1)) if dense else sp.csr_matrix((n + 1, n + 1)))

    def residual(t):
        return ((expm(M(t)) @ zt) if dense else expm_multiply(M(t), zt))[:n] - x

    def jac(t):
        Mt = M(t)
        if dense:
            return np.stack([(expm_frechet(Mt, Ak, compute_expm=False) @ zt)[:n]
                             for Ak in mats], axis=1)
        start = np.concatenate([np.zeros(n + 1), zt])
        return np.stack([expm_multiply(sp.bmat([[Mt, Ak], [None, Mt]], format="csr"),
                                       start)[:n] for Ak in mats], axis=1)

    sol = least_squares(residual, np.zeros(k), jac=jac, method="lm", xtol=1e-14, ftol=1e-14,
                        gtol=1e-14, max_nfev=50 * (k + 1))
    t = sol.x if np.sum(residual(sol.x) ** 2) < np.sum((x - z) ** 2) else np.zeros(k)
    return t, group.act(t, z), False, (f"Levenberg-Marquardt on the {k} field coefficients "
                                       "(exact Jacobian of the group exponential)")


#: the finite groups among them
DISCRETE = (UnitPermutationGroup, SignedPermutationGroup)
#: the group classes :func:`align` has a solver for
ALIGNABLE = (OrthogonalGroup, GeneralLinearGroup, ScalingTorus, UnitPermutationGroup,
             SignedPermutationGroup, FieldGroup, ShearGroup)


def _align_factor(group, x, z):
    """(element, aligned, exact, method) for one factor, or None if it has no aligner."""
    if isinstance(group, OrthogonalGroup):
        return _procrustes(group, x, z)
    if isinstance(group, GeneralLinearGroup):
        return _general_linear(group, x, z)
    if isinstance(group, ScalingTorus):
        return _torus(group, x, z)
    if isinstance(group, UnitPermutationGroup):
        return _units(group, x, z)
    if isinstance(group, SignedPermutationGroup):
        return _signed_permutations(group, x, z)
    if isinstance(group, ShearGroup):
        return _shears(group, x, z)
    if isinstance(group, FieldGroup):
        return _fields(group, x, z)
    return None


# ------------------------------------------------------------------ lower bounds
