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

    def run_layers(self, theta, X=None, shift=0, rows=None, window=None):
        """(logits per layer, log A): every layer's B x H x T x T logits (the last layer's at the
        query ``rows`` only) and the pointer log A = log (1/H) sum_h A^{Lh} at those rows, with
        the positions p_t = t + shift; ``window``: the layers below the last attend only to
        s - window < t <= s."""
        blocks = self.spec.unpack(theta)
        X = self.X if X is None else X
        T = X.shape[1]
        positions = np.arange(T) + shift
        Z = X
        if self.encoding == "learned":
            Z = X + blocks["P"][positions.astype(int) % self.table][None]
        causal = np.tril(np.ones((T, T), bool))
        s, t = np.indices((T, T))
        lower = causal & ((s - t < window) if window else True)
        logits = []
        for l in range(self.layers):
            last = l == self.layers - 1
            L = self.layer_logits(blocks, l, Z, positions, rows if last else None)
            logits.append(L)
            mask = (causal if rows is None else causal[rows]) if last else lower
            logp = _log_softmax(L, mask)
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


def last_query(param, theta, k, chunk=16, window=None):
    """At the last query s = T - 1: the mass w on the target T - 1 - k (B,), whether it is the
    argmax (B,), and the ratios A_t / A_target at the offsets delta = s - t = 0..T-1 (B x T),
    computed ``chunk`` sequences at a time (the last layer at the last row only; ``window``:
    that of the lower layers, ``RopeTransformer.run_layers``)."""
    T = param.tokens
    out = []
    for start in range(0, param.sequences, chunk):
        logA = np.asarray(param.run_layers(theta, X=param.X[start:start + chunk],
                                           rows=[T - 1], window=window)[1])[:, 0]
        out.append(logA)
    logA = np.concatenate(out)
    target = T - 1 - k
    ratio = np.exp(logA - logA[:, target:target + 1])[:, ::-1]  # column delta = T - 1 - t
    return np.exp(logA[:, target]), np.argmax(logA, axis=1) == target, ratio


def dilution_fit(lengths, w, train_len, cumulative=None, boot=200, seed=0):
    """Fits of the mass w(T) on the target (``w``: one array of per-sequence masses per length,
    averaged before the fit; error bars: the standard deviation over ``boot`` bootstrap
    resamples of the sequences):

    * free exponent: log(1/w - 1) = log a + beta log T over T >= 2 train_len (the law: beta = 1);
    * linear law: 1/w - 1 = b + a (T - train_len) over all T (least squares);
    * for each (label, G) of ``cumulative`` (G: the cumulative profile G(T) = sum_{delta =
      train_len}^{T-1} g[delta] per length, ``cumulative_profile``): the profile law 1/w - 1 =
      b' + c G(T) over all T, and its apparent exponent beta_G (the log-log fit over T >=
      2 train_len on the law's values), in ``res["profile"][label]``.
    """
    lengths = np.asarray(lengths, float)
    far = lengths >= 2 * train_len
    cumulative = dict(cumulative or {})

    def slope(z):
        with np.errstate(invalid="ignore"):
            return np.polyfit(np.log(lengths[far]), np.log(z[far]), 1)[0] if (
                z[far] > 0).all() else np.nan

    def fit(idx):
        wm = np.array([wi[idx].mean() for wi in w])
        z = 1.0 / wm - 1.0
        a, b = np.polyfit(lengths - train_len, z, 1)
        out = [slope(z), a, b]
        for G in cumulative.values():
            c, b2 = np.polyfit(G, z, 1)
            out += [c, b2, slope(b2 + c * np.asarray(G))]
        return wm, np.array(out)

    B = len(w[0])
    wm, est = fit(np.arange(B))
    rng = np.random.default_rng(seed)
    err = np.nanstd(np.array([fit(rng.integers(0, B, B))[1] for _ in range(boot)]), axis=0)
    law = 1.0 / (1.0 + est[2] + est[1] * (lengths - train_len))
    res = {"lengths": [int(T) for T in lengths], "w": wm, "beta": est[0], "beta_err": err[0],
           "a": est[1], "a_err": err[1], "b": est[2], "b_err": err[2], "law_w": law,
           "rel_dev": np.abs(law - wm) / wm, "beta_range": (2 * train_len, int(lengths[-1])),
           "profile": {}}
    for j, (label, G) in enumerate(cumulative.items()):
        c, b2, beta_g = est[3 + 3 * j:6 + 3 * j]
        pw = 1.0 / (1.0 + b2 + c * np.asarray(G))
        res["profile"][label] = {
            "c": c, "c_err": err[3 + 3 * j], "b": b2, "b_err": err[4 + 3 * j], "beta": beta_g,
            "beta_err": err[5 + 3 * j], "w": pw, "rel_dev": np.abs(pw - wm) / wm}
    return res


def cumulative_profile(profiles, lengths, train_len):
    """G(T) = sum_{delta = train_len}^{T-1} g_T[delta] for each T of ``lengths``: ``profiles``
    one array g (the same profile at every length) or one array g_T per length."""
    if np.ndim(profiles[0]) == 0:
        profiles = [profiles] * len(lengths)
    return np.array([np.sum(g[train_len:int(T)]) for g, T in zip(profiles, lengths)])


def prefix_prediction(ratios, lengths, train_len, boot=200, seed=0):
    """Parameter-free prediction of w(T) from the last-query ratios A_t / A_target of sequences
    of the largest length (``ratios``: B x T_max, column delta = offset): a length-T sequence's
    last query sees the offsets delta < T, so w(T) = mean_b 1 / sum_{delta < T} ratios[b, delta]
    (exact in distribution for one head in one layer, whose ratios e^{L_t - L*} do not depend on
    T; with several heads each head's normalization depends on T, and in two layers the query's
    stream does too). Returns
    the predicted w per length and its apparent exponent beta (log(1/w - 1) against log T over
    T >= 2 train_len) with its bootstrap error over the B sequences."""
    lengths = np.asarray(lengths, int)
    far = lengths >= 2 * train_len
    prefix = np.cumsum(ratios, axis=1)[:, lengths - 1]  # B x len(lengths)

    def fit(idx):
        w = (1.0 / prefix[idx]).mean(axis=0)
        return w, np.polyfit(np.log(lengths[far]), np.log(1.0 / w[far] - 1.0), 1)[0]

    w, beta = fit(np.arange(len(ratios)))
    rng = np.random.default_rng(seed)
    err = np.std([fit(rng.integers(0, len(ratios), len(ratios)))[1] for _ in range(boot)])
    return {"w": w, "beta": beta, "beta_err": err}


def offset_kernel_rank(param, theta, layer, head, train_len):
    """The offset kernel F[delta] = W_Q R_delta W_K^T (d x d) of one head over the trained offsets
    delta = 0, -1, .., -(train_len - 1), stacked as a train_len x d^2 matrix: its entropy
    effective rank exp(-sum p_i log p_i), p = singular values / their sum (Roy, Vetterli 2007),
    and the share |F[:, 0, 0]| / |F| of the entry between constant features (position only)."""
    blocks = param.spec.unpack(theta)
    WQ, WK = blocks[f"Q{layer}"][head], blocks[f"K{layer}"][head]
    F = np.stack([WQ @ rotate(WK, np.array([delta]), param.frequencies).T
                  for delta in -np.arange(train_len)])  # R_delta W_K^T as rotated rows of W_K
    sv = np.linalg.svd(F.reshape(train_len, -1), compute_uv=False)
    p = sv / sv.sum()
    p = p[p > 0]
    return {"effective_rank": float(np.exp(-(p * np.log(p)).sum())),
            "constant_share": float(np.linalg.norm(F[:, 0, 0]) / np.linalg.norm(F))}


def dilution(train, theta, k, train_len, sequences, seed, window=None):
    """``dilution_fit`` of the mass on the target at the last query of fresh sequences (lengths
    DILUTION_LENGTHS) of the rotary model ``train`` (its sizes, other lengths), with the profile
    law of the mean ratios g measured on other fresh sequences of the largest length, and the
    parameter-free ``prefix_prediction`` from the same ratios; adds the accuracy per length.
    ``window``: the lower layers attend to the last ``window`` keys only (``run_layers``)."""

    def at(T, seed):
        return model(train.heads, train.layers, "rotary", T, sequences, seed, train.d, train.r)

    w, acc = [], []
    for T in DILUTION_LENGTHS:
        p = at(T, seed)
        wi, hit, _ = last_query(p, theta, k, window=window)
        if T == DILUTION_LENGTHS[0] and not window:  # the shortcut is the full forward's row
            np.testing.assert_allclose(wi, np.exp(p.forward(theta)[:, -1, T - 1 - k]),
                                       rtol=1e-10)
        w.append(wi)
        acc.append(float(hit.mean()))
    ratios = last_query(at(DILUTION_LENGTHS[-1], seed + 1), theta, k, window=window)[2]
    cumulative = {"fitted": cumulative_profile(ratios.mean(axis=0), DILUTION_LENGTHS,
                                               train_len)}
    fit = dilution_fit(DILUTION_LENGTHS, w, train_len, cumulative, seed=seed)
    fit["prediction"] = prefix_prediction(ratios, DILUTION_LENGTHS, train_len, seed=seed)
    fit["acc"] = acc
    return fit


def run(k=3, train_len=16, sequences=64, steps=2000, lr=0.2, seed=0, models=MODELS, d=8, r=8):
    """Train every model of ``models`` ((label, heads, layers, encoding)) by ``steps`` steps of
    gradient descent (lr) from theta_0 = 0.1 N(0, I) on ``sequences`` sequences of length
    ``train_len``, as ``rope_retrieval.py`` trains its head; evaluate it unchanged on fresh
    sequences of the TEST_LENGTHS (accuracy, where unseen rows point), its shift invariance
    (generic and trained theta) and, for rotary models, the dilution fits on 2 ``sequences``
    fresh sequences and the last layer's offset kernels. Returns one dict per model."""
    results = []
    for label, heads, layers, encoding in models:
        train = model(heads, layers, encoding, train_len, sequences, seed, d, r)
        theta0 = 0.1 * np.random.default_rng(seed).standard_normal(train.n)
        traj = gradient_descent(train, pointer_loss(train, k), theta0, steps, lr,
                                record_every=steps, conserved=False)
        theta = traj.final_theta
        res = {"label": label, "heads": heads, "layers": layers, "encoding": encoding,
               "n": train.n, "train_loss": float(traj.losses[-1]),
               "generic": input_equivariance(train, seed=seed),
               "shift_error": shift_error(train, theta, 1000 if encoding == "rotary" else 7),
               "eval": {T: evaluate(model(heads, layers, encoding, T, sequences, seed + 1, d, r),
                                    theta, k, train_len) for T in TEST_LENGTHS}}
        if encoding == "rotary":
            res["dilution"] = dilution(train, theta, k, train_len, 2 * sequences, seed + 1)
            res["kernels"] = [offset_kernel_rank(train, theta, layers - 1, h, train_len)
                              for h in range(heads)]
            if layers > 1:  # the same model with its lower layers windowed to train_len keys
                res["dilution_window"] = dilution(train, theta, k, train_len, 2 * sequences,
                                                  seed + 1, window=train_len)
        results.append(res)
    return results


def report(results, k, train_len):
    """The markdown tables of ``run``'s results."""
    lines = [f"Retrieval of the token {k} back by attention-only rotary transformers (pointer: "
             "the last layer's head-averaged causal attention), trained on length T_train = "
             f"{train_len}; accuracy of argmax_t A[s, t] = s - k on fresh sequences.", "",
             "| model | parameters | train loss | shift error, generic theta (k = 1, 2, 5, -3, "
             "1000) | shift error, trained (k = 1000; learned: 7) | acc. s < T_train | "
             "acc. s >= T_train (T = " + " / ".join(str(T) for T in TEST_LENGTHS[1:]) + ") | "
             f"argmax at t < T_train (T = {TEST_LENGTHS[-1]}) | most frequent argmax |",
             "|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        ev = res["eval"]
        seen = [ev[T]["acc_seen"] for T in TEST_LENGTHS]
        last = ev[TEST_LENGTHS[-1]]
        lines.append(f"| {res['label']} | {res['n']} | {res['train_loss']:.2g} | "
                     f"{max(res['generic'].errors.values()):.1e} | {res['shift_error']:.1e} | "
                     f"{min(seen):.3f}-{max(seen):.3f} | "
                     + " / ".join(f"{ev[T]['acc_unseen']:.3f}" for T in TEST_LENGTHS[1:])
                     + f" | {last['argmax_in_train_range']:.3f} | {last['argmax_mode']} |")
    rot = []
    for res in results:
        if "dilution" in res:
            rot.append((res["label"], res["dilution"], res["kernels"]))
        if "dilution_window" in res:
            rot.append((f"{res['label']}, lower layers windowed to {train_len} keys",
                        res["dilution_window"], []))
    dil = rot[0][1]
    lo, hi = dil["beta_range"]
    lines += ["", "Attention dilution (last query of fresh sequences, twice as many as in "
              "training): mass w on the target. beta: log(1/w - 1) = log a + beta log T over "
              f"T = {lo}..{hi}. Linear law 1/w - 1 = b + a (T - {train_len}); profile law 1/w - 1 "
              f"= b' + c G(T), G(T) = sum of g over the offsets {train_len}..T-1, g the mean "
              f"ratio A_t / A_target at each offset on other fresh sequences of length {hi}, "
              "beta_G the law's apparent exponent over the same T; prediction (no constant): "
              "w(T) = mean 1 / (sum of those sequences' ratios over the offsets < T), beta_P its "
              f"apparent exponent. Max. relative deviations of w over T >= {DILUTION_LENGTHS[1]}.",
              "", "| model | beta | a | b | linear law: max. dev. | c | b' | beta_G | profile "
              "law: max. dev. | beta_P | prediction: max. dev. | last layer's heads: effective "
              "rank of F, constant share |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, d, kernels in rot:
        ranks = "; ".join(f"{kr['effective_rank']:.2f}, {kr['constant_share']:.3f}"
                          for kr in kernels) or "-"
        pl, pr = d["profile"]["fitted"], d["prediction"]
        lines.append(f"| {label} | {d['beta']:.3f} +- {d['beta_err']:.3f} | "
                     f"{d['a']:.4f} +- {d['a_err']:.4f} | {d['b']:.2f} +- {d['b_err']:.2f} | "
                     f"{d['rel_dev'][1:].max():.2f} | {pl['c']:.2f} +- {pl['c_err']:.2f} | "
                     f"{pl['b']:.2f} +- {pl['b_err']:.2f} | "
                     f"{pl['beta']:.3f} +- {pl['beta_err']:.3f} | {pl['rel_dev'][1:].max():.2f} | "
                     f"{pr['beta']:.3f} +- {pr['beta_err']:.3f} | "
                     f"{(np.abs(pr['w'] - d['w']) / d['w'])[1:].max():.2f} | {ranks} |")
    lines += ["", "| model | w (T = " + ", ".join(str(T) for T in dil["lengths"])
              + ") | predicted w | accuracy |", "|---|---|---|---|"]
    for label, d, _ in rot:
        lines.append(f"| {label} | " + ", ".join(f"{x:.3f}" for x in d["w"]) + " | "
                     + ", ".join(f"{x:.3f}" for x in d["prediction"]["w"]) + " | "
                     + ", ".join(f"{x:.3f}" for x in d["acc"]) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--offset", type=int, default=3)
    ap.add_argument("--train-len", type=int, default=16)
    ap.add_argument("--sequences", type=int, default=64)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "output"))
    args = ap.parse_args(argv)
    results = run(args.offset, args.train_len, args.sequences, args.steps, args.lr)
    table = report(results, args.offset, args.train_len)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_file(out / "rope_transformer.md", table + "\n", what="table", replace=True)
    print(table)


if __name__ == "__main__":
    main()
