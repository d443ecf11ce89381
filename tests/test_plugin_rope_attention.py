"""The rope-attention plugin and the input-action (equivariance) capability.

Oracles: the logits rebuilt from explicit 2 x 2 rotation matrices R_{t-s} (the RoFormer form
x_s^T W_Q R_{t-s} W_K^T x_t, never rotating queries and keys separately) and from the sinusoidal
formula; the rank of the rank-r d x d matrices r(2d - r) (Absil, Mahony, Sepulchre 2008) for
absolute encodings; for rotary, the rank n - r that a fiber equal to the (C^*)^{r/2} orbit
implies; the commutant of block rotations for ComplexScalingGroup; a toy plugin with a
non-trivial output action for the generic mechanism. The retrieval examples: the rotary head as
the frequency-basis kernel and np.linalg.pinv for the control's minimum-norm solution; the
multi-head, two-layer transformer against per-head, per-layer loops with explicit rotation
matrices (also shifted) and, with one head, against the plugin's log-softmax and the example's
loss; the dilution fits against synthetic laws of known exponent, rate and profile, and the
carrier's profile law against a position-only head, for which it is exact (c = 1); the prefix
prediction against the forward on truncated sequences.

Covers: ``paramgeo.cli``, ``paramgeo.symmetry.discovery``, ``paramgeo.symmetry.equivariance``,
``paramgeo.symmetry.groups``, ``paramgeo_plugins.rope_attention``, ``examples/rope_retrieval.py``,
``examples/rope_transformer.py``.
"""

import json

import autograd.numpy as anp
import numpy as np
import pytest
from click.testing import CliRunner

import paramgeo
from paramgeo import Parameterization, ParamSpec, Size
from paramgeo.cli import main
from paramgeo.symmetry.equivariance import InputAction, input_equivariance
from paramgeo.symmetry import ComplexScalingGroup, discover


def rotation_blocks(delta, freqs):
    """blockdiag(R(delta omega_1), ...), built entry by entry."""
    r = 2 * len(freqs)
    R = np.zeros((r, r))
    for i, w in enumerate(freqs):
        c, s = np.cos(delta * w), np.sin(delta * w)
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, -s], [s, c]]
    return R


def test_rotary_logits_are_the_relative_offset_form(rng):
    p = paramgeo.get("rope-attention", d=5, r=4, tokens=6, sequences=2, base=7.0)
    theta = p.random_point(rng)
    WQ, WK = p.spec.unpack(theta).values()
    freqs = 7.0 ** (-2.0 * np.arange(2) / 4)
    got = p.forward(theta)
    for b in range(2):
        for s in range(6):
            for t in range(6):
                x_s, x_t = p.X[b, s], p.X[b, t]
                want = x_s @ WQ @ rotation_blocks(t - s, freqs) @ WK.T @ x_t
                assert got[b, s, t] == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_absolute_logits_add_sinusoidal_embeddings(rng):
    p = paramgeo.get("rope-attention", d=5, r=2, tokens=4, encoding="absolute", base=100.0)
    theta = p.random_point(rng)
    WQ, WK = p.spec.unpack(theta).values()
    E = np.zeros((4, 5))
    for t in range(4):
        for i in range(5):
            ang = t / 100.0 ** ((i - i % 2) / 5)
            E[t, i] = np.sin(ang) if i % 2 == 0 else np.cos(ang)
    Z = p.X[0] + E
    np.testing.assert_allclose(p.forward(theta)[0], Z @ WQ @ WK.T @ Z.T, rtol=1e-12)


def test_shifting_positions_leaves_rotary_logits_unchanged_and_moves_absolute_ones(rng):
    for encoding, invariant in (("rotary", True), ("absolute", False)):
        p = paramgeo.get("rope-attention", d=4, r=2, tokens=5, encoding=encoding)
        theta = p.random_point(rng)
        moved = p.logits(theta, shift=7.5)
        err = np.linalg.norm(moved - p.forward(theta)) / np.linalg.norm(p.forward(theta))
        assert (err < 1e-12) == invariant, (encoding, err)


@pytest.mark.parametrize("encoding,invariant", [("rotary", True), ("absolute", False)])
def test_discover_reports_the_offset_invariance_for_rotary_only(encoding, invariant):
    args = ["discover", "rope-attention", "-p", f"encoding={encoding}", "-p", "d=3"]
    res = CliRunner().invoke(main, args + ["--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    eq = json.loads(res.output)["input_equivariance"]
    assert eq["equivariant"] is invariant and eq["invariance"] is True
    assert set(eq["errors"]) == {"k=1", "k=2", "k=5", "k=-3"}
    worst = max(eq["errors"].values())
    assert worst < 1e-12 if invariant else worst > 1e-2
    text = CliRunner().invoke(main, args)
    assert ("NOT invariant" in text.output) != invariant


@pytest.mark.parametrize("sizes", [dict(d=3, r=4), dict(d=3, r=2, tokens=4, sequences=2),
                                   dict(d=3, r=3, encoding="absolute", constant_feature=True)])
def test_contract(sizes):
    report = paramgeo.check(paramgeo.get("rope-attention", **sizes))
    assert report.passed, str(report)
    assert "input-action" in {item.property for item in report.items}


def test_discovered_symmetry_is_the_complex_scaling_torus_for_rotary():
    """Rotary, r = 4: the commutant of the block rotations is (C^*)^2, dimension 4 (abelian);
    absolute: gl(2) (the QK-head symmetry)."""
    rot = discover(paramgeo.get("rope-attention", d=3, r=4), discrete=False)
    assert rot.dim == 4 and rot.derived_dim == 0 and "agrees with the declared (C^*)^2" in rot.finding
    ab = discover(paramgeo.get("rope-attention", d=3, r=2, encoding="absolute"), discrete=False)
    assert ab.algebra == "gl(2)"


@pytest.mark.parametrize("d,r", [(4, 2), (5, 4)])
def test_generic_ranks(d, r):
    rot = paramgeo.get("rope-attention", d=d, r=r, tokens=8)
    assert paramgeo.generic_rank(rot) == 2 * d * r - r  # n minus dim (C^*)^{r/2}
    ab = paramgeo.get("rope-attention", d=d, r=r, tokens=8, encoding="absolute")
    assert paramgeo.generic_rank(ab) == r * (2 * d - r)  # rank-r d x d matrices


def test_complex_scaling_group_commutes_with_block_rotations(rng):
    G = ComplexScalingGroup(3, right=[(0, 12, (2, 6))], contragredient=[(12, 24, (2, 6))])
    assert G.name == "(C^*)^3" and G.dim == 6
    A = G.random_element(rng)
    R = rotation_blocks(1.3, [1.0, 0.4, 0.05])
    np.testing.assert_allclose(A @ R, R @ A, atol=1e-12)
    np.testing.assert_allclose(A @ R @ np.linalg.inv(A), R, atol=1e-12)
    # the action keeps Q R K^T: (Q A) R (K A^{-T})^T = Q R K^T
    theta = rng.standard_normal(24)
    moved = G.act(A, theta)
    Q, K = theta[:12].reshape(2, 6), theta[12:].reshape(2, 6)
    Q2, K2 = moved[:12].reshape(2, 6), moved[12:].reshape(2, 6)
    np.testing.assert_allclose(Q2 @ R @ K2.T, Q @ R @ K.T, atol=1e-12)


def test_odd_rotary_head_dimension_is_refused():
    with pytest.raises(paramgeo.SizeError, match="must be even; choose r=4"):
        paramgeo.get("rope-attention", r=3)
    res = CliRunner().invoke(main, ["check", "rope-attention", "-p", "r=3"])
    assert res.exit_code == 2 and res.output.startswith("Error:")


# ---------------------------------------------------------------- the generic mechanism
class _PermutedData(Parameterization):
    """phi(w) = X w on fixed data X (N x p); permuting the data points permutes the outputs:
    equivariance with rho(g) y = y[g] (not an invariance)."""

    name = "test-permuted-data"
    size_params = {"wired": Size("bool", default=True), "rho": Size("bool", default=True)}
    capabilities = frozenset({"input_action"})

    def validate_sizes(self):
        self.data = np.random.default_rng(3).standard_normal((5, 3))

    def make_spec(self):
        return ParamSpec(w=(3,))

    def make_predictor_shape(self):
        return (5,)

    def forward(self, theta):
        return anp.dot(self.data, theta)

    def input_action(self):
        def moved(theta, perm):
            out = self.data[perm] @ theta
            return out if self.wired else out + 1.0

        return InputAction("permutations of the data points", moved,
                           [("cycle", np.roll(np.arange(5), 1)), ("swap", [1, 0, 2, 3, 4])],
                           identity=np.arange(5),
                           output_action=(lambda perm, y: y[perm]) if self.rho else None)


def test_equivariance_with_a_nontrivial_output_action():
    eq = input_equivariance(_PermutedData())
    assert eq.equivariant and not eq.invariance and max(eq.errors.values()) < 1e-14
    # without the output action it is tested as an invariance, which fails
    eq = input_equivariance(_PermutedData(rho=False))
    assert not eq.equivariant and "NOT invariant" in str(eq)


def test_contract_catches_an_input_action_not_wired_to_phi():
    report = paramgeo.check(_PermutedData(wired=False))
    assert not report.passed
    assert {i.property for i in report.failures()} == {"input-action"}


def test_input_action_of_the_wrong_type_is_a_contract_error():
    class Bad(_PermutedData):
        name = "test-bad-action"

        def input_action(self):
            return "shifts"

    with pytest.raises(paramgeo.ContractError, match="must return a paramgeo.symmetry.equivariance"):
        input_equivariance(Bad())
    report = paramgeo.check(Bad())
    assert not report.passed and "input_action() failed" in str(report)


# ---------------------------------------------------------------- learned absolute embeddings
def test_learned_logits_add_the_parameter_rows_and_ignore_rows_beyond_the_sequence(rng):
    """Oracle: (x_s + P_s)^T W_Q W_K^T (x_t + P_t) entry by entry; rows P_p, p >= T, never
    enter phi (so they receive no gradient and keep their initial values under training)."""
    p = paramgeo.get("rope-attention", d=4, r=2, tokens=5, sequences=2, encoding="learned",
                     positions=9)
    assert p.spec.unpack(np.zeros(p.n))["P"].shape == (9, 4) and p.n == 2 * 4 * 2 + 9 * 4
    theta = p.random_point(rng)
    WQ, WK, P = p.spec.unpack(theta).values()
    got = p.forward(theta)
    for b in range(2):
        for s in range(5):
            for t in range(5):
                want = (p.X[b, s] + P[s]) @ WQ @ WK.T @ (p.X[b, t] + P[t])
                assert got[b, s, t] == pytest.approx(want, rel=1e-12, abs=1e-12)
    unused = np.zeros(p.n)
    unused[-4 * 4:] = rng.standard_normal(16)  # rows 5..8 of P
    np.testing.assert_array_equal(p.forward(theta + unused), got)
    np.testing.assert_array_equal(p.jvp(theta, unused), np.zeros(p.m))
    grad = p.vjp(theta, rng.standard_normal(p.m))
    assert np.all(grad[-16:] == 0) and np.linalg.norm(grad[-36:-16]) > 0


def test_learned_derivatives_against_autograd_and_finite_differences(rng):
    """J, J^T w against autograd's Jacobian; the quartic terms make d/dt J(theta + t v) differ
    from J(v), checked against central differences of J."""
    import autograd

    p = paramgeo.get("rope-attention", d=3, r=2, tokens=4, sequences=2, encoding="learned",
                     positions=6, constant_feature=True)
    theta, v, w = p.random_point(rng), rng.standard_normal(p.n), rng.standard_normal(p.m)
    J = p.jacobian(theta)
    J_ad = autograd.jacobian(p.forward_flat)(theta)
    np.testing.assert_allclose(J, J_ad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(p.vjp(theta, w), J_ad.T @ w, rtol=1e-12, atol=1e-12)
    h = 1e-5
    dJ = (p.jacobian(theta + h * v) - p.jacobian(theta - h * v)) / (2 * h)
    np.testing.assert_allclose(p.jacobian_derivative(theta, v), dJ, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(p.hessian_vp(theta, w, v), dJ.T @ w, rtol=1e-6, atol=1e-7)
    assert np.linalg.norm(dJ - p.jacobian(v)) > 1e-3 * np.linalg.norm(dJ)  # not quadratic


@pytest.mark.parametrize("d,r,T,positions", [(3, 2, 6, 8), (4, 2, 6, 6)])
def test_learned_generic_rank_is_n_minus_gl_and_the_unused_rows(d, r, T, positions):
    """For 2r >= d every P_p, p < T, is seen through W_Q^T, W_K^T (no common kernel): the fiber
    is the GL(r) orbit plus the (positions - T) d free coordinates of the unused rows."""
    p = paramgeo.get("rope-attention", d=d, r=r, tokens=T, sequences=2, encoding="learned",
                     positions=positions)
    assert paramgeo.generic_rank(p) == p.n - r * r - (positions - T) * d


def test_learned_contract_and_shift_action():
    p = paramgeo.get("rope-attention", d=3, r=1, tokens=4, encoding="learned",
                     constant_feature=True)
    report = paramgeo.check(p)
    assert report.passed, str(report)
    assert {"jacobian-autograd", "hessian-vp", "input-action"} <= {i.property for i in report.items}
    eq = input_equivariance(p)
    assert not eq.equivariant and min(eq.errors.values()) > 1e-2
    theta = p.random_point(np.random.default_rng(0))
    np.testing.assert_array_equal(p.logits(theta, shift=4), p.forward(theta))  # cyclic rows
    with pytest.raises(ValueError, match="integer positions"):
        p.logits(theta, shift=0.5)


def test_learned_position_sizes_are_checked():
    with pytest.raises(paramgeo.SizeError, match="choose positions >= 6"):
        paramgeo.get("rope-attention", encoding="learned", tokens=6, positions=4)
    with pytest.raises(paramgeo.SizeError, match="use it with encoding=learned"):
        paramgeo.get("rope-attention", positions=8)
    res = CliRunner().invoke(main, ["check", "rope-attention", "-p", "encoding=learned",
                                    "-p", "tokens=6", "-p", "positions=4"])
    assert res.exit_code == 2 and res.output.startswith("Error:") and "Traceback" not in res.output


# ---------------------------------------------------------------- the retrieval example's pieces
def _example():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "rope_retrieval.py"
    spec = importlib.util.spec_from_file_location("rope_retrieval", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rotary_head_is_the_frequency_basis_kernel_and_the_control_is_min_norm(rng):
    """The rotary logits equal the kernel model at c(theta) (explicit features and the per-basis
    route); momentum GD from 0 on the underdetermined control reaches np.linalg.pinv(Phi) y."""
    ex = _example()
    p = ex.head("rotary", 3, 4, 6, 1, 0)
    theta = p.random_point(rng)
    c = ex.rotary_kernel(p, theta)
    np.testing.assert_allclose(ex.control_logits(p, c), p.forward(theta), rtol=1e-10, atol=1e-12)
    Phi = ex.kernel_features(p, p.X)
    np.testing.assert_allclose(Phi @ c, p.forward(theta).ravel(), rtol=1e-10, atol=1e-12)
    c_gd, info = ex.train_linear_control(p, 2, steps=3000)
    assert info["equations"] < info["parameters"] and info["residual_gd"] < 1e-8
    T = 6
    s, t = np.indices((T, T))
    keep = ((t <= s) & (s >= 2)).ravel()
    y = (t == s - 2).ravel()[keep].astype(float)
    c_pinv = np.linalg.pinv(Phi[keep]) @ y
    np.testing.assert_allclose(c_gd, c_pinv, rtol=1e-7, atol=1e-9)
    assert info["gd_vs_minnorm"] < 1e-7


def test_retrieval_metrics_on_a_hand_built_attention():
    """Logits peaked at s - k for s < 8 and at key 1 beyond: accuracy 1 on seen rows, 0 on
    unseen, every unseen argmax at t = 1 < T_train; softmax output error ~0 on seen rows."""
    ex = _example()
    T, k, train_len = 12, 2, 8
    L = np.zeros((1, T, T))
    for s in range(k, T):
        L[0, s, s - k if s < train_len else 1] = 50.0
    X = np.random.default_rng(0).standard_normal((1, T, 3))
    ev = ex.evaluate(L, X, k, train_len)
    assert ev["acc_seen"] == 1.0 and ev["acc_unseen"] == 0.0
    assert ev["argmax_in_train_range"] == 1.0 and ev["argmax_mode"] == 1
    assert ev["out_err_seen"] < 1e-12 and ev["out_err_unseen"] > 0.1


def test_learned_single_sequence_logits_are_the_rank_r_matrices():
    """B = 1: Z = X + P ranges over all T x d matrices, so the logits Z W_Q W_K^T Z^T are the
    rank-r T x T matrices, of dimension r (2T - r) (Absil, Mahony, Sepulchre 2008)."""
    p = paramgeo.get("rope-attention", d=4, r=2, tokens=5, encoding="learned", positions=8)
    assert paramgeo.generic_rank(p) == 2 * (2 * 5 - 2)


# ---------------------------------------------------------------- multi-head, two-layer models
def _transformer():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "rope_transformer.py"
    spec = importlib.util.spec_from_file_location("rope_transformer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hand_forward(p, theta, shift=0, window=None):
    """The transformer by loops: every head and layer separately, each logit z_s^T W_Q
    R_{t-s} W_K^T z_t with an explicit block rotation, softmax row by row, the residual update
    z_s + sum_h sum_t A[s, t] z_t V_h, the pointer log((1/H) sum_h A_h); positions t + shift
    (learned: rows (t + shift) mod positions of P added to the tokens)."""
    blocks = p.spec.unpack(theta)
    B, T, _ = p.predictor_shape
    out = np.zeros((B, T, T))
    for b in range(B):
        Z = p.X[b].copy()
        if p.encoding == "learned":
            Z = Z + blocks["P"][(np.arange(T) + shift) % p.table]
        for l in range(p.layers):
            A = np.zeros((p.heads, T, T))
            for h in range(p.heads):
                WQ, WK = blocks[f"Q{l}"][h], blocks[f"K{l}"][h]
                for s in range(T):
                    keys = [t for t in range(s + 1)
                            if l == p.layers - 1 or window is None or s - t < window]
                    logit = np.array([
                        Z[s] @ WQ @ (rotation_blocks((t + shift) - (s + shift), p.frequencies)
                                     if p.encoding == "rotary" else np.eye(p.r)) @ WK.T @ Z[t]
                        for t in keys])
                    e = np.exp(logit - logit.max())
                    A[h, s, keys] = e / e.sum()
            if l == p.layers - 1:
                mean = A.mean(axis=0)
                out[b] = np.where(np.tril(np.ones((T, T), bool)), np.log(mean + (mean == 0)), 0)
            else:
                Z = Z + sum(A[h] @ Z @ blocks[f"V{l}"][h] for h in range(p.heads))
    return out


@pytest.mark.parametrize("heads, layers, encoding", [(1, 1, "rotary"), (3, 1, "rotary"),
                                                     (2, 2, "rotary"), (2, 2, "learned")])
def test_transformer_forward_is_the_loop_over_heads_and_layers(rng, heads, layers, encoding):
    """The batched forward (heads stacked, rotations as complex pairs) equals the per-head,
    per-layer loops with explicit rotation matrices, also with the positions moved by 7; its
    last-row shortcut equals the forward's last row, with and without a lower-layer window."""
    rt = _transformer()
    extra = {"positions": 9} if encoding == "learned" else {}
    p = rt.RopeTransformer(d=4, r=4, heads=heads, layers=layers, encoding=encoding, tokens=6,
                           sequences=2, base=7.0, **extra)
    theta = 0.7 * rng.standard_normal(p.n)
    np.testing.assert_allclose(p.forward(theta), _hand_forward(p, theta), rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(p.logits(theta, shift=7), _hand_forward(p, theta, shift=7),
                               rtol=1e-10, atol=1e-12)
    for window in (None, 3):
        full = p.run_layers(theta, window=window)[1][:, -1]
        last = p.run_layers(theta, rows=[5], window=window)[1][:, 0]
        np.testing.assert_allclose(last, full, rtol=1e-12, atol=1e-12)
    causal = np.tril(np.ones((6, 6), bool))
    np.testing.assert_allclose(np.where(causal, p.run_layers(theta, window=3)[1], 0),
                               _hand_forward(p, theta, window=3), rtol=1e-10, atol=1e-12)


def test_one_head_transformer_is_the_plugin_head_with_its_loss(rng):
    """H = 1, one layer: log A is the log-softmax of the rope-attention plugin's logits (same
    tokens, same flat theta), and the pointer loss the example's causal cross-entropy."""
    rt, ex = _transformer(), _example()
    p = rt.RopeTransformer(d=4, r=4, heads=1, layers=1, tokens=7, sequences=3)
    q = paramgeo.get("rope-attention", d=4, r=4, tokens=7, sequences=3, constant_feature=True,
                     base=100.0)
    theta = q.random_point(rng)
    causal = np.tril(np.ones((7, 7), bool))
    L = np.where(causal, q.forward(theta), -np.inf)
    logsm = L - np.log(np.exp(L - L.max(2, keepdims=True)).sum(2, keepdims=True)) \
        - L.max(2, keepdims=True)
    np.testing.assert_allclose(p.forward(theta), np.where(causal, logsm, 0), rtol=1e-10,
                               atol=1e-12)
    assert rt.pointer_loss(p, 2).value(p.forward(theta).ravel()) == pytest.approx(
        ex.retrieval_loss(q, 2).value(q.forward(theta).ravel()), rel=1e-12)


def test_transformer_shift_invariance_rotary_not_learned(rng):
    """Claim (a) for two layers: the declared input action (shifts 1, 2, 5, -3, 1000) leaves
    every layer's logits and the pointer unchanged under rotary encodings, to round-off; with
    learned absolute embeddings it does not."""
    rt = _transformer()
    p = rt.RopeTransformer(d=4, r=4, heads=2, layers=2, tokens=6, sequences=2)
    eq = input_equivariance(p)
    assert eq.equivariant and max(eq.errors.values()) < 1e-12
    assert rt.shift_error(p, p.random_point(rng), shift=1000) < 1e-12
    q = rt.RopeTransformer(d=4, r=4, heads=2, layers=2, tokens=6, sequences=2,
                           encoding="learned", positions=8)
    assert not input_equivariance(q).equivariant


def test_dilution_fit_recovers_synthetic_laws():
    """Masses built from known laws: z = 1/w - 1 = 0.03 T^0.8 gives beta = 0.8 (free exponent);
    z = 0.5 + 0.02 (T - 16) gives a = 0.02, b = 0.5; z = 0.1 + 2 G(T) gives c = 2, b' = 0.1 and
    beta_G = the slope of log(0.1 + 2 G) against log T; identical sequences: zero error bars."""
    rt = _transformer()
    lengths = np.array([16, 32, 64, 128, 256, 512])
    far = lengths >= 32

    def masses(z):
        return [np.full(5, 1.0 / (1.0 + zi)) for zi in z]

    res = rt.dilution_fit(lengths, masses(0.03 * lengths ** 0.8), 16)
    assert res["beta"] == pytest.approx(0.8, abs=1e-10) and res["beta_err"] < 1e-12
    res = rt.dilution_fit(lengths, masses(0.5 + 0.02 * (lengths - 16)), 16)
    assert (res["a"], res["b"]) == pytest.approx((0.02, 0.5), abs=1e-10)
    assert res["rel_dev"].max() < 1e-10
    g = 0.05 + 0.04 * np.cos(0.3 * np.arange(512))  # a peaked profile
    G = rt.cumulative_profile(g, lengths, 16)
    assert G[2] == pytest.approx(sum(g[16:64]))
    np.testing.assert_allclose(rt.cumulative_profile([g] * 6, lengths, 16), G)
    res = rt.dilution_fit(lengths, masses(0.1 + 2 * G), 16, {"peaks": G})
    law = res["profile"]["peaks"]
    assert (law["c"], law["b"]) == pytest.approx((2.0, 0.1), abs=1e-9)
    want = np.polyfit(np.log(lengths[far]), np.log(0.1 + 2 * G[far]), 1)[0]
    assert law["beta"] == pytest.approx(want, abs=1e-9) == res["beta"]


def test_prefix_prediction_is_the_mass_on_truncated_sequences(rng):
    """One head, one layer: the last query of the last T tokens of a sequence sees the offsets
    < T with the same logits, so the prefix prediction from the long sequences equals the mean
    mass of the forward on the truncated sequences (with two heads it does not: each head's
    softmax is normalized over the T keys)."""
    rt = _transformer()
    p = rt.RopeTransformer(d=4, r=4, heads=1, layers=1, tokens=12, sequences=5)
    theta = p.random_point(rng)
    k, lengths = 2, [4, 8, 12]
    w_long, _, ratios = rt.last_query(p, theta, k, chunk=2)
    pred = rt.prefix_prediction(ratios, lengths, 4, boot=5)
    for i, T in enumerate(lengths):
        logA = p.run_layers(theta, X=p.X[:, -T:])[1]
        assert pred["w"][i] == pytest.approx(np.exp(logA[:, -1, T - 1 - k]).mean(), rel=1e-10)
    assert pred["w"][-1] == pytest.approx(w_long.mean(), rel=1e-12)
    q = rt.RopeTransformer(d=4, r=4, heads=2, layers=1, tokens=12, sequences=5)
    theta = q.random_point(rng)
    pred = rt.prefix_prediction(rt.last_query(q, theta, k)[2], lengths, 4, boot=5)
    logA = q.run_layers(theta, X=q.X[:, -4:])[1]
    assert abs(pred["w"][0] - np.exp(logA[:, -1, 1]).mean()) > 1e-3


def test_offset_kernel_of_a_position_only_head():
    """A head that reads only the constant feature (W_Q, W_K zero beyond row 0) has the offset
    kernel f(delta) e_1 e_1^T: effective rank 1, all of it in the constant entry."""
    rt = _transformer()
    p = rt.RopeTransformer(d=4, r=4, heads=1, layers=1, tokens=8)
    blocks = {name: np.zeros(shape) for name, shape in p.spec.blocks.items()}
    blocks["Q0"][0, 0] = [1.0, 0.5, -0.3, 0.2]
    blocks["K0"][0, 0] = [0.7, 0.1, 0.4, -0.6]
    theta = np.concatenate([blocks[name].ravel() for name in p.spec.blocks])
    kr = rt.offset_kernel_rank(p, theta, 0, 0, 8)
    assert kr["effective_rank"] == pytest.approx(1.0) and kr["constant_share"] == 1.0


def test_carrier_profile_law_is_exact_for_a_position_only_head():
    """A head reading only the constant feature has logits f(t - s) at every sequence, so at the
    last query 1/w - 1 = sum_{delta < T, delta != k} e^{f(-delta) - f(-k)} exactly: the
    example's carrier profile law fits with c = 1 and b' = the trained offsets' sum, and the
    position-only rate a_carrier is the mean of e^{f - f*} over the untrained offsets."""
    ex = _example()
    k, train_len = 3, 16
    p = ex.head("rotary", 4, 4, train_len, 2, 0)
    blocks = {"WQ": np.zeros((4, 4)), "WK": np.zeros((4, 4))}
    blocks["WQ"][0] = [0.9, -0.4, 0.6, 0.3]
    blocks["WK"][0] = [0.5, 0.8, -0.7, 0.2]
    theta = np.concatenate([blocks["WQ"].ravel(), blocks["WK"].ravel()])
    c = ex.rotary_kernel(p, theta)
    res = ex.dilution_fit(4, 4, theta, k, train_len, 2, 0,
                          lambda deltas: ex.offset_kernel(p, c, deltas), boot=3)
    f = ex.offset_kernel(p, c, -np.arange(512))[:, 0]
    g = np.exp(f - f[k])
    prof = res["carrier"]
    assert prof["c"] == pytest.approx(1.0, abs=1e-9)
    assert prof["b"] == pytest.approx(g[:train_len].sum() - 1.0, abs=1e-9)
    assert prof["rel_dev"].max() < 1e-9 and prof["c_err"] < 1e-12
    assert res["a_carrier"] == pytest.approx(g[train_len:].mean(), rel=1e-12)
