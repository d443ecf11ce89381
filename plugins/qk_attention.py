"""QK attention: scores S_h = W_Q^h (W_K^h)^T for heads h = 1..H, model dimension d, head dim r.

Parameters W_Q, W_K in R^{H x d x r} (``tied``: one W in R^{H x d x r} with S_h = W_h W_h^T,
as in attention-indexed models with tied query and key). The predictor depends on ``output``:

* ``scores`` (default): the stack (S_1, ..., S_H), shape H x d x d;
* ``sum``: S = sum_h S_h, shape d x d (a multi-head bilinear form; head order is lost);
* ``attention``: A_h = softmax_rowwise(X S_h X^T / sqrt(d)) for a fixed token matrix X in
  R^{T x d}, shape H x T x T. X is drawn from ``numpy.random.default_rng(token_seed)`` with
  i.i.d. N(0, 1) entries (T = ``tokens``); ``constant_feature=true`` sets its first column to 1
  (a bias feature), which puts the all-ones vector in range(X).

Derivatives (closed forms; dL, dA for attention):

* dS_h = dQ_h K_h^T + Q_h dK_h^T (tied: dW_h W_h^T + W_h dW_h^T); sum: dS = sum_h dS_h.
* attention: dL_h = X dS_h X^T / sqrt(d), dA_h = A_h * (dL_h - rowsum(A_h * dL_h) 1^T).
* VJP of a cotangent G: attention first maps G_h -> Z_h = A_h * (G_h - rowsum(A_h * G_h) 1^T)
  -> X^T Z_h X / sqrt(d); sum broadcasts G to every head; then (dQ_h, dK_h) = (G_h K_h, G_h^T Q_h)
  (tied: dW_h = (G_h + G_h^T) W_h).
* All evaluated on the factors (X Q_h and X K_h for attention, the concatenated heads for sum),
  never on the d x d scores; attention keeps the forward values of the last point.
* Rank at a point (``rank_at``): the closed-form singular values of U V^T / U U^T per head
  (scores) or of the concatenated heads (sum); for attention a formula in rank X, rank X Q_h,
  rank X K_h and whether 1 lies in range X, range X K_h (see ``rank_at``).

Symmetry: GL(r)^H acting per head (Q_h, K_h) -> (Q_h A_h, K_h A_h^{-T}) (tied: O(r)^H,
W_h -> W_h R_h), times the head permutations S_H when ``output=sum`` (swapping two heads
leaves the sum unchanged; for ``scores`` and ``attention`` it permutes the output, so it is not
a symmetry there). For ``sum`` the full fiber is larger than this group: sum_h Q_h K_h^T =
[Q_1 .. Q_H][K_1 .. K_H]^T is invariant under all of GL(Hr) (tied: O(Hr)), which mixes heads,
so the generic rank is below the quotient dimension of GL(r)^H.

Generic ranks (r <= d; k = min(H r, d)):

* scores, untied: H r (2d - r) (H copies of the rank-r manifold of d x d matrices, dimension
  r(2d - r); Absil, Mahony, Sepulchre 2008, Prop. 3.3 / Mishra et al. 2014);
* scores, tied: H (d r - r(r-1)/2) (rank-r PSD matrices; Journee et al. 2010);
* sum, untied: k (2d - k) (rank-k matrices); sum, tied: d k - k(k-1)/2 (rank-k PSD matrices);
* attention (derived here, checked numerically in the tests): for T > d and generic X (ones not
  in range X) the linear map S -> X S X^T is injective and meets the row shifts c 1^T only in 0,
  so the rank is that of ``scores``; with ones = X b in range X (``constant_feature``), the
  tangent directions a b^T with a in col(S_h) are killed by the softmax, lowering the rank by r
  per head (untied) and by 0 (tied: a b^T is then not symmetric). For T <= d, range X = R^T,
  S -> X S X^T maps onto the T x T matrices of rank k = min(r, T), and the row shifts c 1^T
  tangent to them (c in col(L_h)) are lost: the rank per head is k(2T - k) - k (untied) and
  T k - k(k-1)/2 - [k = T] (tied; 1 1^T is tangent only when k = T).

References: Vaswani et al. (2017), "Attention is all you need"; Absil, Mahony, Sepulchre (2008),
"Optimization algorithms on matrix manifolds"; Journee, Bach, Absil, Sepulchre (2010), "Low-rank
optimization on the cone of positive semidefinite matrices"; Mishra, Meyer, Bonnabel,
Sepulchre (2014), "Fixed-rank matrix factorizations and Riemannian low-rank optimization";
Boncoraglio, Troiani, Erba, Zdeborova (2025), "Bayes optimal learning of attention-indexed
models", NeurIPS (arXiv:2506.01582; attention scores through S = W W^T).
"""

import dataclasses
import math
import warnings

import autograd.numpy as anp
import numpy as np

from paramgeo import NumericalDoubtWarning, Parameterization, ParamSpec, Size, SizeError, get
from paramgeo.contract.parameterization import require_entries
from paramgeo.geometry.factor_spectra import (
    gram_jacobian_singular_values,
    product_jacobian_singular_values,
)
from paramgeo.linalg import decide_rank, range_basis
from paramgeo.symmetry import (
    GeneralLinearGroup,
    OrthogonalGroup,
    ProductGroup,
    SignedPermutationGroup,
)


class QKAttention(Parameterization):
    """Multi-head scores S_h = W_Q^h W_K^h^T (tied: W_h W_h^T): stack, sum or softmax attention.

    ``output=attention`` applies softmax(X S_h X^T / sqrt(d)) row-wise to the seeded token
    matrix X (attribute ``X``, T x d)."""

    name = "qk-attention"
    size_params = {
        "d": Size("int", default=4, minimum=1, help="model dimension"),
        "r": Size("int", default=2, minimum=1, help="head dimension (r <= d)"),
        "heads": Size("int", default=2, minimum=1, help="number of heads H"),
        "tied": Size("bool", default=False, help="S_h = W_h W_h^T (query = key)"),
        "output": Size("choice", default="scores", choices=("scores", "sum", "attention"),
                       help="scores (stack of S_h), sum (sum_h S_h) or attention (softmax)"),
        "tokens": Size("int", default=6, minimum=1,
                       help="number of tokens T of X (output=attention)", primary=False),
        "token_seed": Size("int", default=0, minimum=0,
                           help="seed of the N(0, 1) token matrix X (output=attention)", primary=False),
        "constant_feature": Size("bool", default=False,
                                 help="set X's first column to 1 (output=attention)", primary=False),
    }
    capabilities = frozenset(
        {"jvp", "vjp", "jacobian", "symmetry", "symbolic", "horizontal_projection", "rank_at"}
    )
    references = (
        "Vaswani et al. (2017) Attention is all you need",
        "Mishra, Meyer, Bonnabel, Sepulchre (2014) Fixed-rank matrix factorizations and "
        "Riemannian low-rank optimization",
        "Journee, Bach, Absil, Sepulchre (2010) Low-rank optimization on the cone of positive "
        "semidefinite matrices",
        "Boncoraglio, Troiani, Erba, Zdeborova (2025) Bayes optimal learning of "
        "attention-indexed models",
    )

    def validate_sizes(self):
        H, T = self.heads, self.tokens
        require_entries("qk-attention", parameters=2 * H * self.d * self.r,
                        tokens=T * self.d if self.output == "attention" else 0,
                        predictor=H * T * T if self.output == "attention" else H * self.d ** 2)
        if self.r > self.d:
            raise SizeError(
                f"qk-attention: head dimension r={self.r} exceeds the model dimension d={self.d};"
                " then S_h is generically of full rank and GL(r) no longer acts freely; "
                "choose r <= d"
            )
        if self.output == "attention":
            X = np.random.default_rng(self.token_seed).standard_normal((self.tokens, self.d))
            if self.constant_feature:
                X[:, 0] = 1.0
        else:
            X = None
        self.X = X  # the token matrix (T x d) for output=attention, else None
        # X / d^(1/4): logits (Xs Q_h)(Xs K_h)^T = X S_h X^T / sqrt(d) with no extra scaling
        self._Xs = None if X is None else X / self.d ** 0.25
        self._last = None  # (theta, primal values) of the last attention point, see _primal

    def make_spec(self):
        shape = (self.heads, self.d, self.r)
        return ParamSpec(W=shape) if self.tied else ParamSpec(WQ=shape, WK=shape)

    def make_predictor_shape(self):
        if self.output == "sum":
            return (self.d, self.d)
        if self.output == "attention":
            return (self.heads, self.tokens, self.tokens)
        return (self.heads, self.d, self.d)

    def random_point(self, rng):
        return rng.standard_normal(self.n) / np.sqrt(self.r)

    # ------------------------------------------------------------------ forward
    def _factors(self, theta):
        """(Q, K), each (..., H, d, r) for theta of shape (..., n) (Q is K when tied)."""
        shape = theta.shape[:-1] + (self.heads, self.d, self.r)
        k = self.heads * self.d * self.r
        Q = theta[..., :k].reshape(shape)  # the method: numpy's and autograd's boxes alike
        K = Q if self.tied else theta[..., k:].reshape(shape)
        return Q, K

    def forward(self, theta):
        Q, K = self._factors(theta)
        if self.output == "attention":
            XQ, XK = anp.matmul(self._Xs, Q), anp.matmul(self._Xs, K)  # Xs = X / d^(1/4)
            logits = anp.matmul(XQ, anp.transpose(XK, (0, 2, 1)))
            logits = logits - anp.max(logits, axis=-1, keepdims=True)
            e = anp.exp(logits)
            return e / anp.sum(e, axis=-1, keepdims=True)
        S = anp.matmul(Q, anp.transpose(K, (0, 2, 1)))
        return anp.sum(S, axis=0) if self.output == "sum" else S

    # ------------------------------------------------------------------ derivatives
    # Everything is computed from the factors, never from the d x d scores: for attention the
    # logits are L_h = (Xs Q_h)(Xs K_h)^T with Xs = X / d^(1/4), so Xs Q_h and Xs K_h (T x r)
    # replace X S_h X^T / sqrt(d) (O(T d r) instead of O(T d^2)); for sum,
    # sum_h Q_h K_h^T = Qc Kc^T with the heads concatenated, Qc = [Q_1 ... Q_H] (d x H r), one
    # matrix product instead of H and a sum.
    def _concat_heads(self, M):
        """(..., H, d, r) -> (..., 1, d, H r): [M_1 ... M_H] as a single head."""
        lead = M.shape[:-3]
        return np.swapaxes(M, -3, -2).reshape(lead + (1, self.d, self.heads * self.r))

    def _split_heads(self, M):
        """The inverse of :meth:`_concat_heads` for (1, d, H r) -> (H, d, r)."""
        return np.swapaxes(M.reshape(self.d, self.heads, self.r), 0, 1)

    def _sides(self, theta):
        """The per-head left and right factors (P_h, R_h) whose product P_h R_h^T is the
        bilinear part of the output: (Q_h, K_h) for scores, the concatenated heads for sum, and
        (Xs Q_h, Xs K_h) for attention (tied: P = R). Linear in theta."""
        theta = np.asarray(theta, float)
        if self.output == "attention" and not self.tied:
            # theta = [Q, K] is 2H heads in a row: one stacked product (a tenth faster than two)
            heads = self._Xs @ theta.reshape(theta.shape[:-1] + (2 * self.heads, self.d, self.r))
            return heads[..., :self.heads, :, :], heads[..., self.heads:, :, :]
        Q, K = self._factors(theta)
        if self.output == "sum":
            Q = self._concat_heads(Q)
            K = Q if self.tied else self._concat_heads(K)
        elif self.output == "attention":
            Q = K = self._Xs @ Q
        return Q, K

    def _primal(self, theta):
        """(P, R, A) at theta: the factors of :meth:`_sides` and, for attention, the softmax
        A_h = softmax_rowwise(P_h R_h^T) (else None). For attention the values at the last point
        are kept, so repeated JVPs and VJPs at one theta (Lanczos or conjugate gradients on
        J^T J, the matrix-free routes) pay the forward products X Q_h, X K_h once."""
        theta = np.asarray(theta, float)
        if self.output != "attention":
            return (*self._sides(theta), None)
        last = self._last
        # a new point usually differs in its first entries: compare those before the whole
        # vector (a full comparison of n entries is a tenth of a cold product at d = 768)
        if (last is not None and np.array_equal(last[0][:64], theta[:64])
                and np.array_equal(last[0], theta)):
            return last[1]
        P, R = self._sides(theta)
        logits = P @ np.swapaxes(R, -1, -2)
        logits -= logits.max(axis=-1, keepdims=True)
        A = np.exp(logits, out=logits)
        A /= A.sum(axis=-1, keepdims=True)
        self._last = (theta.copy(), (P, R, A))
        return P, R, A

    #: outputs (batch x heads x rows^2 entries) up to which _jvp_batch takes the two products
    #: dP R^T + P dR^T instead of one product of stacked copies
    PAIR_MAX_ENTRIES = 10_000

    def _jvp_batch(self, theta, dirs):
        """J dirs^T for a batch of directions dirs (b x n); returns b x m.

        d(P R^T) = dP R^T + P dR^T = [dP, P] [R, dR]^T (one product with inner size 2r; tied:
        [dP, P] [P, dP]^T); attention: dL = that and dA = A * dL - A * rowsum(A * dL)."""
        P, R, A = self._primal(theta)
        dP, dR = self._sides(dirs)
        b, (h, rows, k) = dirs.shape[0], P.shape
        # stack batch and heads in one leading axis: numpy's matmul reaches BLAS on 3-d stacks
        # but falls back to a slow loop for 4-d stacks of transposed operands
        dP, dR = dP.reshape(b * h, rows, k), dR.reshape(b * h, rows, k)
        if b > 1:
            P = np.broadcast_to(P, (b, h, rows, k)).reshape(b * h, rows, k)
            R = np.broadcast_to(R, (b, h, rows, k)).reshape(b * h, rows, k)
        if b * h * rows * rows <= self.PAIR_MAX_ENTRIES:  # small: no stacked copies (see uut)
            out = dP @ np.swapaxes(R, -1, -2) + P @ np.swapaxes(dR, -1, -2)
        elif self.tied:  # dP P^T + P dP^T = [dP, P] [P, dP]^T: one pass over the output
            out = (np.concatenate([dP, P], axis=-1)
                   @ np.swapaxes(np.concatenate([P, dP], axis=-1), -1, -2))
        else:
            out = (np.concatenate([dP, P], axis=-1)
                   @ np.swapaxes(np.concatenate([R, dR], axis=-1), -1, -2))
        if A is not None:
            out = A * out.reshape(b, h, rows, rows)
            out -= A * np.sum(out, axis=-1, keepdims=True)
        return out.reshape(b, self.m)

    def jvp(self, theta, v):
        if self.output == "scores" and self.m <= self.PAIR_MAX_ENTRIES:
            # small scores: dQ_h K_h^T + Q_h dK_h^T straight from the blocks (no batch axis)
            Q, K = self._factors(np.asarray(theta, float))
            dQ, dK = self._factors(np.asarray(v, float))
            return (dQ @ K.swapaxes(-1, -2) + Q @ dK.swapaxes(-1, -2)).ravel()
        return self._jvp_batch(theta, np.asarray(v, float)[None, :])[0]

    def jacobian(self, theta):
        return self._jvp_batch(theta, np.eye(self.n)).T

    def vjp(self, theta, w):
        """J^T G: (G_h R_h, G_h^T P_h) per head (tied: (G_h + G_h^T) P_h) on the factors of
        :meth:`_sides`, pulled back to (Q, K): attention first maps G_h to
        Z_h = A_h * G_h - A_h * rowsum(A_h * G_h) and then (Xs^T dP, Xs^T dR); sum splits the
        concatenated heads."""
        P, R, A = self._primal(theta)
        G = np.reshape(np.asarray(w, float), P.shape[:-2] + (P.shape[-2],) * 2)
        if A is not None:
            G = A * G
            G -= A * np.sum(G, axis=-1, keepdims=True)
        GT = np.swapaxes(G, -1, -2)
        # tied: (G + G^T) P as G P + G^T P, two products reading G in place (no strided sum)
        grads = [G @ P + GT @ P] if self.tied else [G @ R, GT @ P]
        if A is not None:  # Xs^T g straight into the output vector (no concatenating copy)
            out = np.empty(self.n)
            k = self.heads * self.d * self.r
            for i, g in enumerate(grads):
                np.matmul(self._Xs.T, g, out=out[i * k:(i + 1) * k].reshape(
                    self.heads, self.d, self.r))
            return out
        if self.output == "sum":
            grads = [self._split_heads(g) for g in grads]
        return np.concatenate([g.ravel() for g in grads])

    # ------------------------------------------------------------------ rank at a point
    def rank_at(self, theta, policy=None):
        """rank J(theta) in closed form from the factors (see "Rank at a point" in the docs).

        scores, sum: J is block diagonal over heads (scores) or the Jacobian of the
        concatenated heads Qc Kc^T (sum), so its singular values are those of U V^T and U U^T
        in closed form (:mod:`paramgeo.geometry.factor_spectra`): ``singular_values`` are those of J.

        attention: with C = range X (dimension c = rank X) and, per head, kq = rank X Q_h,
        kk = rank X K_h (tied: k = rank X W_h),
            rank_h = c^2 - (c - kq)(c - kk) - [1 in C] (c if 1 in range X K_h else kq)
            (tied: c k - k(k-1)/2 - [1 in range X W_h]),
        and rank J = sum_h rank_h. The logit map (dQ, dK) -> X (dQ K^T + Q dK^T) X^T has the
        tangent space of the rank-(kq, kk) products inside C x C as image (dimension: the uvt /
        uut formula in c dimensions), and the softmax derivative (A_h > 0) kills exactly its
        row shifts g 1^T, which lie in that image iff 1 in C and (g in range X Q_h or
        1 in range X K_h) (tied: g = t 1 and 1 in range X W_h). The decision is taken on the
        factors: ``singular_values``, ``tol``, ``gap`` and ``closest`` are those of the factor
        decision nearest its tolerance (the one a perturbation would flip first; a membership
        1 in range M is decided as the rank of (1, |(I - P_M) 1| / |1|)), ``doubtful`` if any
        factor decision is."""
        Q, K = self._factors(np.asarray(theta, float))
        what = f"J of {self.name}"
        if self.output == "sum":
            Q = self._concat_heads(Q)
            K = Q if self.tied else self._concat_heads(K)
        if self.output != "attention":
            spectra = [gram_jacobian_singular_values(Qh) if self.tied
                       else product_jacobian_singular_values(Qh, Kh) for Qh, Kh in zip(Q, K)]
            return decide_rank(np.concatenate(spectra), policy, what=what)
        decisions = []
        ones = np.ones(self.tokens) / math.sqrt(self.tokens)

        def rank_and_ones(M):
            """(rank M, whether 1 lies in range M), recording both decisions."""
            B, decision = range_basis(M, policy, warn=False)
            residual = float(np.linalg.norm(ones - B @ (B.T @ ones)))
            inside = decide_rank(np.array([1.0, residual]), policy, warn=False)
            decisions.extend([decision, inside])
            return decision.rank, inside.rank == 1

        c, ones_in_C = rank_and_ones(self.X)
        total = 0
        for Qh, Kh in zip(self.X @ Q, self.X @ K):
            kq, ones_in_Q = rank_and_ones(Qh)
            if self.tied:
                total += c * kq - kq * (kq - 1) // 2 - int(ones_in_Q)
                continue
            kk, ones_in_K = rank_and_ones(Kh)
            drop = 0 if not ones_in_C else (c if ones_in_K else kq)
            total += c * c - (c - kq) * (c - kk) - drop
        margins = [abs(math.log(d.closest / d.tol)) if d.tol > 0 and d.closest > 0 else math.inf
                   for d in decisions]
        nearest = decisions[int(np.argmin(margins))]
        doubtful = any(d.doubtful for d in decisions)
        if doubtful:
            warnings.warn(
                f"rank of {what} decided near the tolerance: a factor singular value "
                f"{nearest.closest:.3g} vs tol {nearest.tol:.3g} (rank {total}); pass a "
                "RankPolicy to decide otherwise", NumericalDoubtWarning, stacklevel=2)
        return dataclasses.replace(nearest, rank=total, doubtful=doubtful)

    # ------------------------------------------------------------------ symmetry
    def _head_blocks(self, block):
        """(start, stop, shape) of every head of a (H, d, r) block, for MatrixGroupAction."""
        start, size = self.spec.slices[block].start, self.d * self.r
        return [(start + h * size, start + (h + 1) * size, (self.d, self.r))
                for h in range(self.heads)]

    def _head_swap(self, h):
        """The permutation of theta exchanging heads h and h + 1 in every block."""
        perm = np.arange(self.n)
        size = self.d * self.r
        for block in self.spec.blocks:
            start = self.spec.slices[block].start
            a = np.arange(start + h * size, start + (h + 1) * size)
            perm[a], perm[a + size] = a + size, a
        return perm, np.ones(self.n)

    def symmetry(self):
        if self.tied:
            factors = [OrthogonalGroup(self.r, right=[blk]) for blk in self._head_blocks("W")]
        else:
            factors = [
                GeneralLinearGroup(self.r, right=[q], contragredient=[k])
                for q, k in zip(self._head_blocks("WQ"), self._head_blocks("WK"))
            ]
        if self.output == "sum" and self.heads > 1:
            swaps = [self._head_swap(h) for h in range(self.heads - 1)]
            factors.append(SignedPermutationGroup(f"S_{self.heads}", swaps, self.n))
        return factors[0] if len(factors) == 1 else ProductGroup(*factors)

    # For scores and sum, phi is a homogeneous quadratic map: J(theta) is linear in theta, the
    # derivative of J along v is J(v), and (sum_i w_i Hess phi_i) v = J(v)^T w. The softmax
    # output is not quadratic and keeps the autograd default.
    def jacobian_derivative(self, theta, v):
        if self.output == "attention":
            return super().jacobian_derivative(theta, v)
        return self.jacobian(v)

    def hessian_vp(self, theta, w, v):
        if self.output == "attention":
            return super().hessian_vp(theta, w, v)
        return self.vjp(v, w)

    def horizontal_projection(self, theta, v):
        """Euclidean horizontal projection, head by head (the head permutations are discrete
        and add no vertical directions): the uvt projection of (dQ_h, dK_h) at (Q_h, K_h)
        (tied: the uut projection of dW_h at W_h)."""
        per_head = (get("uut", d=self.d, r=self.r) if self.tied
                    else get("uvt", m=self.d, n=self.d, r=self.r))
        size = self.d * self.r
        blocks = [self.spec.slices[b].start for b in self.spec.blocks]
        theta, v = np.asarray(theta, float), np.asarray(v, float)
        out = np.empty(self.n)
        for h in range(self.heads):
            idx = np.concatenate([np.arange(s + h * size, s + (h + 1) * size) for s in blocks])
            out[idx] = per_head.horizontal_projection(theta[idx], v[idx])
        return out

    def symbolic(self):
        import sympy

        def head(prefix, h):
            return sympy.Matrix(self.d, self.r,
                                lambda i, k: sympy.Symbol(f"{prefix}_{h}_{i}_{k}", real=True))

        names = ["W"] if self.tied else ["Q", "K"]
        mats = {p: [head(p, h) for h in range(self.heads)] for p in names}
        symbols = [s for p in names for M in mats[p] for s in M]
        Qs = mats[names[0]]
        Ks = mats[names[-1]]
        S = [Q * K.T for Q, K in zip(Qs, Ks)]
        if self.output == "sum":
            return symbols, list(sum(S, sympy.zeros(self.d, self.d)))
        if self.output == "scores":
            return symbols, [e for Sh in S for e in Sh]
        X = sympy.Matrix(self.X)
        exprs = []
        for Sh in S:
            L = X * Sh * X.T / sympy.sqrt(self.d)
            for t in range(self.tokens):
                row = [sympy.exp(L[t, s]) for s in range(self.tokens)]
                total = sum(row)
                exprs.extend(e / total for e in row)
        return symbols, exprs
