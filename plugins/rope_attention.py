"""Attention logits with rotary (RoPE) or absolute position encodings.

Parameters W_Q, W_K in R^{d x r} (one head; blocks ``WQ``, ``WK``). The predictor is the array
of attention logits of B = ``sequences`` fixed token sequences x_1..x_T in R^d at positions
p_t = t (t = 0..T-1), shape B x T x T. The tokens are drawn from
``numpy.random.default_rng(token_seed)`` with i.i.d. N(0, 1) entries; ``constant_feature=true``
sets their first coordinate to 1 (a bias feature, through which a head can attend by position
alone).

* ``encoding=rotary`` (Su et al. 2021, "RoFormer"): with R_p = blockdiag(R(p omega_1), ...,
  R(p omega_{r/2})) rotating the coordinate pairs (2i, 2i+1) by p omega_i, omega_i =
  base^{-2i/r},

      logits[s, t] = (R_{p_s} W_Q^T x_s) . (R_{p_t} W_K^T x_t) = x_s^T W_Q R_{p_t - p_s} W_K^T x_t,

  since R_a^T R_b = R_{b-a}: the logit depends on the positions through the offset p_t - p_s
  alone. Moving every position by k (p -> p + k) leaves the logits unchanged: an exact
  invariance under the translations of the positions, declared as the ``input_action``
  capability (tested by ``paramgeo discover``; :mod:`paramgeo.symmetry.equivariance`). r must be even.
* ``encoding=absolute`` (Vaswani et al. 2017): fixed sinusoidal embeddings e_p (e_p[2i] =
  sin(p / base^{2i/d}), e_p[2i+1] = cos(p / base^{2i/d})) added to the tokens,

      logits[s, t] = (x_s + e_{p_s})^T W_Q W_K^T (x_t + e_{p_t}).

  The cross terms x_s^T W_Q W_K^T e_{p_t} depend on the absolute position p_t, so shifting the
  positions changes the logits (``paramgeo discover`` reports the invariance as absent).
* ``encoding=learned`` (the learned absolute embeddings of BERT/GPT-style transformers):
  a third parameter block P in R^{positions x d} (``positions`` >= T rows; 0 means T), the
  row P_p added to the token at position p,

      logits[s, t] = (x_s + P_{p_s})^T W_Q W_K^T (x_t + P_{p_t}),

  so only the rows P_0..P_{T-1} enter phi: trained on length T, the rows p >= T receive no
  gradient and keep their initial values (the head evaluated on longer sequences meets
  embeddings it never shaped). ``logits(theta, shift=k)`` reads the rows (t + k) mod
  ``positions`` (the cyclic group of the table's indices, integer k), not an invariance.

Symmetry. Absolute and learned: GL(r) acting by (W_Q, W_K) -> (W_Q A, W_K A^{-T}), as for a QK
head, with P fixed. For learned embeddings no linear action moves P: phi(P + E) = phi(P) for
all theta would need E_p^T W_Q W_K^T = 0 for every W. At a given theta with 2r < d the
components of P_p in ker W_Q^T cap ker W_K^T (dimension d - 2r) are invisible, a degeneracy of
that point's Jacobian, not a group; the rows P_p, p >= T, do not enter phi at all (free
coordinates, which discovery reports as a larger linear symmetry than the declared GL(r)).
Rotary: (W_Q A) R_delta (W_K A^{-T})^T = W_Q R_delta W_K^T for every offset delta iff A commutes
with the block rotations R_delta; for distinct frequencies omega_i (and offsets delta omega_i not
all multiples of pi) the commutant is blockdiag(rho_i R(phi_i)): the group (C^*)^{r/2} of complex
scalars on the rotation planes, dimension r (``paramgeo.symmetry.ComplexScalingGroup``), instead
of GL(r) of dimension r^2. ``paramgeo check`` compares both with the linear symmetries
discovered from the map alone.

References: Su, Lu, Pan, Murtadha, Wen, Liu (2021), "RoFormer: enhanced transformer with rotary
position embedding" (arXiv:2104.09864); Vaswani et al. (2017), "Attention is all you need"
(sinusoidal absolute encodings); Devlin, Chang, Lee, Toutanova (2019), "BERT" (learned
absolute position embeddings).
"""

import autograd.numpy as anp
import numpy as np

from paramgeo import Parameterization, ParamSpec, Size, SizeError
from paramgeo.contract.parameterization import require_entries
from paramgeo.symmetry.equivariance import InputAction
from paramgeo.symmetry import ComplexScalingGroup, GeneralLinearGroup, blocks_of

#: the position shifts k tested by the declared input action
SHIFTS = (1, 2, 5, -3)


class RopeAttention(Parameterization):
    """Attention logits x_s^T W_Q R_{t-s} W_K^T x_t (rotary), (x_s + e_s)^T W_Q W_K^T (x_t + e_t)
    (absolute, sinusoidal e) or with learned e = P (learned) on B seeded token sequences of
    length T; shape B x T x T."""

    name = "rope-attention"
    size_params = {
        "d": Size("int", default=4, minimum=1, help="model (token) dimension"),
        "r": Size("int", default=2, minimum=1, help="head dimension (even for rotary)"),
        "encoding": Size("choice", default="rotary", choices=("rotary", "absolute", "learned"),
                         help="rotary (RoPE), absolute (sinusoidal, added to the tokens) or "
                              "learned (absolute embeddings as parameters P)"),
        "positions": Size("int", default=0, minimum=0,
                          help="rows of the learned embeddings P (encoding=learned; 0: tokens)",
                          primary=False),
        "tokens": Size("int", default=5, minimum=1, help="sequence length T"),
        "sequences": Size("int", default=1, minimum=1, help="number B of token sequences",
                          primary=False),
        "token_seed": Size("int", default=0, minimum=0,
                           help="seed of the N(0, 1) tokens", primary=False),
        "constant_feature": Size("bool", default=False,
                                 help="set every token's first coordinate to 1", primary=False),
        "base": Size("float", default=10000.0, minimum=1.0,
                     help="frequency base: omega_i = base^(-2i/r)", primary=False),
    }
    capabilities = frozenset({"symmetry", "input_action", "jacobian", "jvp", "vjp"})
    references = (
        "Su, Lu, Pan, Murtadha, Wen, Liu (2021) RoFormer: enhanced transformer with rotary "
        "position embedding",
        "Vaswani et al. (2017) Attention is all you need",
        "Devlin, Chang, Lee, Toutanova (2019) BERT: pre-training of deep bidirectional "
        "transformers for language understanding",
    )

    def validate_sizes(self):
        B, T = self.sequences, self.tokens
        if self.encoding != "learned" and self.positions:
            raise SizeError(f"rope-attention: positions={self.positions} sets the rows of learned "
                            f"embeddings; use it with encoding=learned (or drop it)")
        self.table = (self.positions or T) if self.encoding == "learned" else 0
        if self.table and self.table < T:
            raise SizeError(f"rope-attention: {T} tokens need {T} learned position embeddings, "
                            f"got positions={self.positions}; choose positions >= {T} (or 0)")
        require_entries("rope-attention",
                        parameters=2 * self.d * self.r + self.table * self.d,
                        frequencies=self.r,
                        tokens=B * T * self.d, predictor=B * T * T)
        if self.encoding == "rotary" and self.r % 2:
            raise SizeError(f"rope-attention: rotary encodings rotate coordinate pairs, so the "
                            f"head dimension r={self.r} must be even; choose r={self.r + 1}")
        if self.base <= 1.0 and self.encoding == "rotary":
            raise SizeError("rope-attention: base must exceed 1 (distinct frequencies)")
        X = np.random.default_rng(self.token_seed).standard_normal(
            (self.sequences, self.tokens, self.d))
        if self.constant_feature:
            X[..., 0] = 1.0
        self.X = X  # the tokens, B x T x d
        #: rotary frequencies omega_i = base^{-2i/r}, i = 0..r/2-1
        self.frequencies = self.base ** (-2.0 * np.arange(self.r // 2) / max(self.r, 1))

    def make_spec(self):
        if self.encoding == "learned":
            return ParamSpec(WQ=(self.d, self.r), WK=(self.d, self.r), P=(self.table, self.d))
        return ParamSpec(WQ=(self.d, self.r), WK=(self.d, self.r))

    def make_predictor_shape(self):
        return (self.sequences, self.tokens, self.tokens)

    def random_point(self, rng):
        return rng.standard_normal(self.n) / np.sqrt(self.r)

    # ------------------------------------------------------------------ forward
    def sinusoidal(self, positions):
        """Absolute embeddings e_p in R^d (len(positions) x d): e_p[2i] = sin(p / base^{2i/d}),
        e_p[2i+1] = cos(p / base^{2i/d}) (Vaswani et al. 2017)."""
        i = np.arange(self.d)
        angle = np.outer(positions, self.base ** (-(i - i % 2) / self.d))
        return np.where(i % 2 == 0, np.sin(angle), np.cos(angle))

    def rotate(self, Z, positions):
        """R_p z for every row: the pairs (2i, 2i+1) of Z (..., T, r) rotated by p_t omega_i.
        On a numpy array, one pass of complex products (z_2i + i z_2i+1) e^{i p_t omega_i};
        under autograd's tracing (forward), the same rotation in real arithmetic."""
        angle = np.outer(positions, self.frequencies)  # T x r/2
        if isinstance(Z, np.ndarray):
            pairs = np.ascontiguousarray(Z, dtype=float).view(np.complex128)
            return (pairs * np.exp(1j * angle)).view(np.float64)
        c, s = np.cos(angle), np.sin(angle)
        shape = anp.shape(Z)
        pairs = anp.reshape(Z, shape[:-1] + (self.r // 2, 2))
        z0, z1 = pairs[..., 0], pairs[..., 1]
        return anp.reshape(anp.stack([z0 * c - z1 * s, z0 * s + z1 * c], axis=-1), shape)

    def logits(self, theta, shift=0):
        """The B x T x T logits with the tokens at positions p_t = t + shift."""
        blocks = self.spec.unpack(theta)
        positions = np.arange(self.tokens) + shift
        if self.encoding == "rotary":
            Q = self.rotate(anp.matmul(self.X, blocks["WQ"]), positions)
            K = self.rotate(anp.matmul(self.X, blocks["WK"]), positions)
        elif self.encoding == "learned":
            if float(shift) != int(shift):
                raise ValueError(f"rope-attention: learned embeddings are indexed by integer "
                                 f"positions; got shift={shift}, use an integer")
            Xp = self.X + blocks["P"][positions.astype(int) % self.table][None]
            Q, K = anp.matmul(Xp, blocks["WQ"]), anp.matmul(Xp, blocks["WK"])
        else:
            Xp = self.X + self.sinusoidal(positions)[None]
            Q, K = anp.matmul(Xp, blocks["WQ"]), anp.matmul(Xp, blocks["WK"])
        return anp.matmul(Q, anp.transpose(K, (0, 2, 1)))

    def forward(self, theta):
        return self.logits(theta)

    # ------------------------------------------------------------------ derivatives
    # With the features Z = X (rotary), X + E (absolute) or X + P_{0..T-1} (learned) and
    # rho = R_p (rotary) or the identity, phi = rho(Z W_Q) rho(Z W_K)^T, so
    #   J (dQ, dK, dP) = rho(dZ W_Q + Z dQ) rho(Z W_K)^T + rho(Z W_Q) rho(dZ W_K + Z dK)^T
    # with dZ = dP_{0..T-1} (zero without learned embeddings), and with gQ = rho^T(G rho(Z W_K)),
    # gK = rho^T(G^T rho(Z W_Q)) (rho^T the rotation by -p), summed over the sequences,
    #   J^T G = (Z^T gQ, Z^T gK, [gQ W_Q^T + gK W_K^T]_{rows 0..T-1}, 0 for the rows >= T).
    # Without learned embeddings phi is a homogeneous quadratic map of theta: d/dt J(theta + t v)
    # = J(v) and (sum_i w_i Hess phi_i) v = J(v)^T w; with them phi has quartic terms
    # P W_Q W_K^T P^T and the second derivatives are autograd's (the base class). Autograd and
    # finite differences are the oracles in the contract check.
    def _features(self, blocks):
        positions = np.arange(self.tokens)
        if self.encoding == "rotary":
            return self.X, positions
        if self.encoding == "learned":
            return self.X + blocks["P"][:self.tokens][None], None
        return self.X + self.sinusoidal(positions)[None], None

    def _rho(self, Z, positions, sign=1):
        return Z if positions is None else self.rotate(Z, sign * positions)

    def _jvp_batch(self, theta, dirs):
        """J dirs^T for a batch of directions dirs (b x n); returns b x m: the two terms as one
        batched matrix product [rho(dZ W_Q + Z dQ), rho(Z W_Q)] [rho(Z W_K), rho(dZ W_K +
        Z dK)]^T (inner dimension 2r), no temporary of the output's size beyond the output."""
        blocks = self.spec.unpack(np.asarray(theta, float))
        Z, pos = self._features(blocks)
        Q, K = (self._rho(Z @ blocks[k], pos) for k in ("WQ", "WK"))
        b, half = dirs.shape[0], self.d * self.r
        dQ = Z @ dirs[:, None, :half].reshape(b, 1, self.d, self.r)
        dK = Z @ dirs[:, None, half:2 * half].reshape(b, 1, self.d, self.r)
        if self.encoding == "learned":
            dZ = dirs[:, 2 * half:].reshape(b, 1, self.table, self.d)[:, :, :self.tokens]
            dQ, dK = dQ + dZ @ blocks["WQ"], dK + dZ @ blocks["WK"]
        dQ, dK = self._rho(dQ, pos), self._rho(dK, pos)
        left = np.concatenate([dQ, np.broadcast_to(Q, dQ.shape)], axis=-1)
        right = np.concatenate([np.broadcast_to(K, dK.shape), dK], axis=-1)
        return (left @ np.swapaxes(right, -1, -2)).reshape(b, -1)

    def jvp(self, theta, v):
        return self._jvp_batch(theta, np.asarray(v, float)[None, :])[0]

    def jacobian(self, theta):
        return self._jvp_batch(theta, np.eye(self.n)).T

    def vjp(self, theta, w):
        blocks = self.spec.unpack(np.asarray(theta, float))
        Z, pos = self._features(blocks)
        Q, K = (self._rho(Z @ blocks[k], pos) for k in ("WQ", "WK"))
        G = np.reshape(np.asarray(w, float), self.predictor_shape)
        gQ = self._rho(G @ K, pos, sign=-1)
        gK = self._rho(np.swapaxes(G, 1, 2) @ Q, pos, sign=-1)
        Zf = Z.reshape(-1, self.d)  # Z^T g summed over the sequences: one BLAS product each
        parts = [(Zf.T @ gQ.reshape(-1, self.r)).ravel(), (Zf.T @ gK.reshape(-1, self.r)).ravel()]
        if self.encoding == "learned":
            gP = np.zeros((self.table, self.d))
            gP[:self.tokens] = (gQ @ blocks["WQ"].T + gK @ blocks["WK"].T).sum(axis=0)
            parts.append(gP.ravel())
        return np.concatenate(parts)

    def jacobian_derivative(self, theta, v):
        if self.encoding == "learned":
            return super().jacobian_derivative(theta, v)
        return self.jacobian(v)

    def hessian_vp(self, theta, w, v):
        if self.encoding == "learned":
            return super().hessian_vp(theta, w, v)
        return self.vjp(v, w)

    # ------------------------------------------------------------------ structure
    def symmetry(self):
        """(C^*)^{r/2} (rotary) or GL(r) (absolute, learned; P fixed) on (W_Q, W_K)."""
        right, contra = blocks_of(self.spec, "WQ"), blocks_of(self.spec, "WK")
        if self.encoding == "rotary":
            return ComplexScalingGroup(self.r // 2, right=right, contragredient=contra)
        return GeneralLinearGroup(self.r, right=right, contragredient=contra)

    def input_action(self):
        """Translations of the positions p_t -> p_t + k, expected to leave the logits unchanged
        (rho = id): exact for rotary encodings, absent for absolute ones (for learned ones the
        shift is cyclic on the rows of P)."""
        return InputAction("shifts of every position p -> p + k", self.logits,
                           [(f"k={k}", k) for k in SHIFTS], identity=0)
