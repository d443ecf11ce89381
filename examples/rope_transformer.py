"""Multi-head and two-layer rotary transformers on the fixed-offset retrieval task of
``rope_retrieval.py``, and the attention-dilution law with the carrier's profile.

Model (``RopeTransformer``, attention only, residual stream Z in R^d, Z^0 = X the tokens with a
constant first feature; ``encoding=learned``: Z^0 = X + P_p, learned absolute embeddings). Layer
l has H heads h with W_Q^{lh}, W_K^{lh} in R^{d x r}; head h's logits and causal attention are

    L^{lh}[s, t] = (R_{p_s} W_Q^{lh T} z_s) . (R_{p_t} W_K^{lh T} z_t)
                 = z_s^T W_Q^{lh} R_{p_t - p_s} W_K^{lh T} z_t,    A^{lh} = softmax_{t <= s} L^{lh},

(rotary, Su et al. 2021; R_p as in the ``rope-attention`` plugin; learned: no rotation), and a
layer below the last writes to the stream through a value-output matrix V^{lh} in R^{d x d},

    Z^{l+1} = Z^l + sum_h A^{lh} Z^l V^{lh}.

The last layer is the pointer: the head average A = (1/H) sum_h A^{Lh}, a distribution over the
keys t <= s. The predictor is log A (B x T x T; 0 above the diagonal), the loss the example's
causal cross-entropy ell = mean_{b, s >= k} -log A[b, s, s - k]. With H = 1 and one layer this is
the ``rope-attention`` head of ``rope_retrieval.py`` with its loss.

Shift invariance (claim (a) for these models). Every rotary logit depends on the positions through
p_t - p_s only, and Z^{l+1} is built from such logits and from Z^l, so by induction over the
layers every layer's logits and the pointer are invariant under p -> p + k (declared as the
``input_action`` capability and tested by ``paramgeo.symmetry.equivariance``).

Attention dilution. For any attention row with mass w on the target, 1/w - 1 = sum_{t != target}
A_t / A_target exactly. With g(delta) = the mean ratio A_t / A_target at the offset delta = s - t
of the last query, the competitors of a length-T sequence sum to

    1/w(T) - 1 ~ b + c G(T),    G(T) = sum_{delta = T_train}^{T - 1} g(delta)       (profile law)

(b: the T_train trained offsets; c = 1 when the ratios do not depend on T, as for one head). A
flat profile g = a gives the linear law b + a (T - T_train) of ``rope_retrieval.py``; the carrier's
peaks make G(T) grow faster than linearly at small T, hence an apparent exponent below 1 in
log(1/w - 1) = log a + beta log T. ``dilution_fit`` fits both laws and the free exponent, with
bootstrap error bars over the sequences, and reports the profile law's own apparent exponent.

Run:  python examples/rope_transformer.py [--steps 1500] [--out DIR]
(also run by ``python examples/rope_retrieval.py``). Writes DIR/rope_transformer.md.

References: Su et al. (2021), "RoFormer"; Vaswani et al. (2017), "Attention is all you need"
(multi-head attention, residual stream); Elhage et al. (2021), "A mathematical framework for
transformer circuits" (the value-output matrices V^{lh} of attention-only transformers).
"""

import argparse
from pathlib import Path

import autograd.numpy as anp
import numpy as np

import paramgeo
from paramgeo.flows import gradient_descent
from paramgeo.io.files import write_file
from paramgeo.losses import CallableLoss
from paramgeo.symmetry.equivariance import InputAction, input_equivariance

TEST_LENGTHS = (16, 32, 64, 128)
DILUTION_LENGTHS = (16, 32, 64, 128, 256, 512)
#: (label, heads, layers, encoding) of the models run by ``run``
MODELS = (("1 head, 1 layer", 1, 1, "rotary"), ("2 heads, 1 layer", 2, 1, "rotary"),
          ("4 heads, 1 layer", 4, 1, "rotary"), ("2 heads, 2 layers", 2, 2, "rotary"),
          ("2 heads, 2 layers, learned", 2, 2, "learned"))
NEG = -1e30  # the logit of a masked (non-causal) key


def rotate(Z, positions, frequencies):
    """R_p z for every row of Z (..., T, r): the pairs (2i, 2i+1) rotated by p_t omega_i, in
    real arithmetic (autograd-traceable); z_2i' = z_2i cos - z_2i+1 sin, z_2i+1' = z_2i sin +
    z_2i+1 cos."""
    angle = np.outer(positions, frequencies)
    c, s = np.cos(angle), np.sin(angle)
    shape = anp.shape(Z)
    pairs = anp.reshape(Z, shape[:-1] + (len(frequencies), 2))
    z0, z1 = pairs[..., 0], pairs[..., 1]
    return anp.reshape(anp.stack([z0 * c - z1 * s, z0 * s + z1 * c], axis=-1), shape)


def _log_softmax(L, mask):
    L = anp.where(mask, L, NEG)
    top = anp.max(L, axis=-1, keepdims=True)
    return L - top - anp.log(anp.sum(anp.exp(L - top), axis=-1, keepdims=True))


class RopeTransformer(paramgeo.Parameterization):
    """Attention-only transformer with ``heads`` rotary (or learned-absolute) heads per layer and
    ``layers`` layers; predictor log A, the head-averaged causal attention of the last layer
    (module docstring), B x T x T."""

    name = "rope-transformer"
    size_params = {
        "d": paramgeo.Size("int", default=8, minimum=1, help="model (token) dimension"),
        "r": paramgeo.Size("int", default=8, minimum=2, help="head dimension (even)"),
        "heads": paramgeo.Size("int", default=2, minimum=1, help="heads per layer"),
        "layers": paramgeo.Size("int", default=1, minimum=1, help="attention layers"),
        "encoding": paramgeo.Size("choice", default="rotary", choices=("rotary", "learned")),
        "positions": paramgeo.Size("int", default=0, minimum=0,
                                   help="rows of the learned table P (0: tokens)"),
        "tokens": paramgeo.Size("int", default=16, minimum=1, help="sequence length T"),
        "sequences": paramgeo.Size("int", default=1, minimum=1, help="sequences B"),
        "token_seed": paramgeo.Size("int", default=0, minimum=0),
        "base": paramgeo.Size("float", default=100.0, minimum=1.0),
    }
    capabilities = frozenset({"input_action"})

    def validate_sizes(self):
        if self.r % 2:
            raise paramgeo.SizeError(f"rope-transformer: r={self.r} must be even")
        self.table = (self.positions or self.tokens) if self.encoding == "learned" else 0
        if self.encoding == "learned" and self.table < self.tokens:
            raise paramgeo.SizeError(f"rope-transformer: choose positions >= {self.tokens}")
        X = np.random.default_rng(self.token_seed).standard_normal(
            (self.sequences, self.tokens, self.d))
        X[..., 0] = 1.0  # the constant feature: attention by position alone is possible
        self.X = X
        self.frequencies = self.base ** (-2.0 * np.arange(self.r // 2) / self.r)

    def make_spec(self):
        blocks = {}
        for l in range(self.layers):
            blocks[f"Q{l}"] = blocks[f"K{l}"] = (self.heads, self.d, self.r)
            if l < self.layers - 1:
                blocks[f"V{l}"] = (self.heads, self.d, self.d)
        if self.table:
            blocks["P"] = (self.table, self.d)
        return paramgeo.ParamSpec(blocks)

    def make_predictor_shape(self):
        return (self.sequences, self.tokens, self.tokens)

    def layer_logits(self, blocks, l, Z, positions, rows=None):
        """B x H x len(rows) x T logits L^{lh}[s, t] of layer l on the stream Z (rows: the query
        positions, default all); the heads' W_Q^{lh} are the block Q{l} (H x d x r)."""
        rows = np.arange(anp.shape(Z)[1]) if rows is None else np.asarray(rows)
        Q = anp.matmul(Z[:, None, rows], blocks[f"Q{l}"])  # B x H x rows x r
        K = anp.matmul(Z[:, None], blocks[f"K{l}"])
        if self.encoding == "rotary":
            Q = rotate(Q, positions[rows], self.frequencies)
            K = rotate(K, positions, self.frequencies)
        return anp.matmul(Q, anp.swapaxes(K, 2, 3))

    def run_layers(self, theta, X=None, shift=0, rows=None):
        """(logits per layer, log A): every layer's B x H x T x T logits (the last layer's at the
        query ``rows`` only) and the pointer log A = log (1/H) sum_h A^{Lh} at those rows, with
        the positions p_t = t + shift."""
        blocks = self.spec.unpack(theta)
        X = self.X if X is None else X
        T = X.shape[1]
        positions = np.arange(T) + shift
        Z = X
        if self.encoding == "learned":
            Z = X + blocks["P"][positions.astype(int) % self.table][None]
        causal = np.tril(np.ones((T, T), bool))
        logits = []
        for l in range(self.layers):
            last = l == self.layers - 1
            L = self.layer_logits(blocks, l, Z, positions, rows if last else None)
            logits.append(L)
            logp = _log_softmax(L, causal[rows] if last and rows is not None else causal)
            if last:
                top = anp.max(logp, axis=1, keepdims=True)
                logA = top[:, 0] + anp.log(anp.mean(anp.exp(logp - top), axis=1))
                return logits, logA
            A = anp.exp(logp)
            Z = Z + anp.sum(anp.matmul(anp.matmul(A, Z[:, None]), blocks[f"V{l}"]), axis=1)

    def logits(self, theta, shift=0):
        """The predictor log A with every position moved to p_t = t + shift (0 above the
        diagonal)."""
        T = self.tokens
        logA = self.run_layers(theta, shift=shift)[1]
        return anp.where(np.tril(np.ones((T, T), bool))[None], logA, 0.0)

    def forward(self, theta):
        return self.logits(theta)

    def input_action(self):
        """Translations p -> p + k of every position (k = 1, 2, 5, -3, 1000), the predictor
        expected unchanged."""
        return InputAction("shifts of every position p -> p + k", self.logits,
                           [(f"k={k}", k) for k in (1, 2, 5, -3, 1000)], identity=0)


def pointer_loss(param, k):
    """ell(log A) = mean_{b, s >= k} -log A[b, s, s - k], the causal cross-entropy of pointing
    from s to s - k (rope_retrieval.py's loss, on the log-probabilities)."""
    B, T, _ = param.predictor_shape
    rows = np.arange(k, T)

    def ell(beta):
        return -anp.mean(anp.reshape(beta, (B, T, T))[:, rows, rows - k])

    return CallableLoss(ell, m=param.m)


def model(heads, layers, encoding, tokens, sequences, seed, d=8, r=8):
    """A ``RopeTransformer`` (learned: max(DILUTION_LENGTHS) rows of P, the rows >= T_train
    untrained)."""
    extra = {"positions": max(DILUTION_LENGTHS)} if encoding == "learned" else {}
    return RopeTransformer(d=d, r=r, heads=heads, layers=layers, encoding=encoding,
                           tokens=tokens, sequences=sequences, token_seed=seed, **extra)


def evaluate(param, theta, k, train_len):
    """Pointer accuracy (argmax_{t <= s} A[s, t] == s - k) on rows k <= s < train_len and
    s >= train_len, the share of the unseen rows' argmax at a key t < train_len and their most
    frequent argmax key."""
    logA = np.asarray(param.run_layers(theta)[1])
    T = param.tokens
    rows = np.arange(k, T)
    arg = np.argmax(np.where(np.tril(np.ones((T, T), bool))[None], logA, -np.inf)[:, rows],
                    axis=2)
    hit, seen = arg == (rows - k)[None], rows < train_len
    nan = float("nan")
    unseen = (~seen).any()
    return {"acc_seen": float(hit[:, seen].mean()),
            "acc_unseen": float(hit[:, ~seen].mean()) if unseen else nan,
            "argmax_in_train_range": float((arg[:, ~seen] < train_len).mean()) if unseen else nan,
            "argmax_mode": int(np.bincount(arg[:, ~seen].ravel()).argmax()) if unseen else -1}


def shift_error(param, theta, shift=1000):
    """max over layers (logits) and the pointer of |f(p + shift) - f(p)| / |f(p)|."""
    base, moved = param.run_layers(theta), param.run_layers(theta, shift=shift)
    pairs = list(zip(base[0], moved[0])) + [(base[1], moved[1])]
    return max(float(np.linalg.norm(np.asarray(b) - np.asarray(m)) / np.linalg.norm(b))
               for b, m in pairs)


def last_query(param, theta, k, chunk=16):
    """At the last query s = T - 1: the mass w on the target T - 1 - k (B,), whether it is the
    argmax (B,), and the ratios A_t / A_target at the offsets delta = s - t = 0..T-1 (B x T),
    computed ``chunk`` sequences at a time (the last layer at the last row only)."""
    T = param.tokens
    out = []
    for start in range(0, param.sequences, chunk):
        logA = np.asarray(param.run_layers(theta, X=param.X[start:start + chunk],
                                           rows=[T - 1])[1])[:, 0]
        out.append(logA)
    logA = np.concatenate(out)
    target = T - 1 - k
    ratio = np.exp(logA - logA[:, target:target + 1])[:, ::-1]  # column delta = T - 1 - t
    return np.exp(logA[:, target]), np.argmax(logA, axis=1) == target, ratio


def dilution_fit(lengths, w, train_len, profile=None, boot=200, seed=0):
    """Fits of the mass w(T) on the target (``w``: one array of per-sequence masses per length,
    averaged before the fit; error bars: the standard deviation over ``boot`` bootstrap
    resamples of the sequences):

    * free exponent: log(1/w - 1) = log a + beta log T over T >= 2 train_len (the law: beta = 1);
    * linear law: 1/w - 1 = b + a (T - train_len) over all T (least squares);
    * with ``profile`` g (g[delta] = mean ratio A_t / A_target at offset delta, delta =
      0..max T - 1): the profile law 1/w - 1 = b' + c G(T), G(T) = sum_{delta = train_len}^{T-1}
      g[delta], and its apparent exponent beta_profile (the same log-log fit on the law's values).
    """
    lengths = np.asarray(lengths, float)
    far = lengths >= 2 * train_len
    G = None if profile is None else np.array(
        [np.sum(profile[train_len:int(T)]) for T in lengths])

    def fit(idx):
        wm = np.array([wi[idx].mean() for wi in w])
        z = 1.0 / wm - 1.0
        beta = np.polyfit(np.log(lengths[far]), np.log(z[far]), 1)[0]
        a, b = np.polyfit(lengths - train_len, z, 1)
        out = [beta, a, b]
        if G is not None:
            c, b2 = np.polyfit(G, z, 1)
            zp = b2 + c * G
            out += [c, b2, np.polyfit(np.log(lengths[far]), np.log(zp[far]), 1)[0]]
        return wm, np.array(out)

    B = len(w[0])
    wm, est = fit(np.arange(B))
    rng = np.random.default_rng(seed)
    err = np.array([fit(rng.integers(0, B, B))[1] for _ in range(boot)]).std(axis=0)
    law = 1.0 / (1.0 + est[2] + est[1] * (lengths - train_len))
    res = {"lengths": [int(T) for T in lengths], "w": wm, "beta": est[0], "beta_err": err[0],
           "a": est[1], "a_err": err[1], "b": est[2], "b_err": err[2], "law_w": law,
           "rel_dev": np.abs(law - wm) / wm, "beta_range": (2 * train_len, int(lengths[-1]))}
    if G is not None:
        pw = 1.0 / (1.0 + est[4] + est[3] * G)
        res.update(c=est[3], c_err=err[3], b_profile=est[4], b_profile_err=err[4],
                   beta_profile=est[5], beta_profile_err=err[5], profile_w=pw,
                   profile_rel_dev=np.abs(pw - wm) / wm)
    return res
