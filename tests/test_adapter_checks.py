"""What a framework model must pass before any engine runs: forward is a function of theta, and
the precision of its arithmetic is measured.

Oracles: a torch or JAX model that draws random numbers, bumps a buffer or attribute, or
updates its own weight is refused with that reason, a well-behaved one is built; the deep
linear network 6-4-3-5 computed in float32 inside a float64 interface has the generic rank
r (n_0 + n_L - r) = 24 of its float64 twin (Trager, Kohn, Bruna 2020); the measured round-off
of a forward quantised to a grid of step q is q / sqrt(12) relative to |phi| (the variance of a
uniform rounding error), and that of float32 arithmetic is of the order of its unit 2^-24.

Covers: ``paramgeo.contract.determinism``, ``paramgeo.geometry.precision``,
``paramgeo.linalg.numerics``, ``paramgeo.reports.description``, ``paramgeo_plugins.deep_linear``,
``paramgeo_plugins.uut``.
"""

import os
import re
import warnings

import autograd.numpy as anp
import numpy as np
import pytest

import paramgeo
from paramgeo.contract.determinism import function_of_theta, plugin_state
from paramgeo.errors import (ContractError, NumericalDoubtWarning, ParamgeoError, PluginError,
                             ShapeError)
from paramgeo.geometry.precision import FLOAT32_UNIT, arithmetic_noise, noise_policy

if os.environ.get("CI"):  # CI installs both (make test): there a missing framework fails
    import jax
    import torch
else:
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(1)


class Dropout(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        return F.dropout(self.lin(x), 0.5, training=True)


class Noisy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        y = self.lin(x)
        return y + torch.randn(y.shape, dtype=y.dtype)


class BufferCounter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x):
        self.calls += 1
        return self.lin(x)


class AttributeCounter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x)


class InPlaceWeight(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(2, 3))

    def forward(self, x):
        with torch.no_grad():
            self.w.add_(1.0)
        return x @ self.w.T


@pytest.mark.parametrize("module, reason", [
    (Dropout, "two evaluations at the same theta differ"),
    (Noisy, "two evaluations at the same theta differ"),
    (BufferCounter, "forward changed buffer 'calls'"),
    (AttributeCounter, "forward changed attribute 'calls'"),
    (InPlaceWeight, r"forward changed the parameters it was given in place \(6 entries, first "
                    r"w\[0,0\]"),
])
def test_a_forward_that_is_not_a_function_of_theta_is_refused_at_from_torch(module, reason):
    torch.manual_seed(0)
    with pytest.raises(ContractError, match=reason) as info:
        paramgeo.from_torch(module(), torch.eye(3))
    assert f"torch module {module.__name__}" in str(info.value)
    assert "not a function of theta" in str(info.value)


def test_a_model_with_state_forward_leaves_alone_is_built():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Tanh())
    net.calls = 0  # an attribute forward does not touch
    p = paramgeo.from_torch(net, np.random.default_rng(0).standard_normal((5, 3)))
    assert "buffer '1.running_mean'" in p.model_state()
    assert "attribute 'calls'" in p.model_state()
    rng = np.random.default_rng(0)
    assert function_of_theta(p.forward_flat, p.random_point(rng), p.random_point(rng),
                             state=lambda: plugin_state(p)) is None


def test_a_jax_function_drawing_numpy_random_numbers_is_refused():
    def noisy(params, x):
        return x @ params["W"] + np.random.standard_normal(2)

    with pytest.raises(ContractError, match="two evaluations at the same theta differ"):
        paramgeo.from_jax(noisy, {"W": np.ones((3, 2))}, np.eye(3))


def test_a_jax_bound_method_counting_its_calls_is_refused():
    class Model:
        calls = 0

        def apply(self, params, x):
            self.calls += 1
            return jnp.tanh(x @ params["W"])

    with pytest.raises(ContractError, match="forward changed attribute 'calls'"):
        paramgeo.from_jax(Model().apply, {"W": np.ones((3, 2))}, np.eye(3))


class _Stateful(paramgeo.Parameterization):
    """u -> u * (1 + calls): forward counts its calls (not a function of theta)."""

    name = "stateful-test"
    size_params = {"p": paramgeo.Size("int", default=2)}
    calls = 0

    def make_spec(self):
        return paramgeo.ParamSpec(u=(self.p,))

    def make_predictor_shape(self):
        return (self.p,)

    def forward(self, theta):
        self.calls += 1
        return theta * (1.0 + self.calls)


class _Mutating(_Stateful):
    """theta -> theta ** 2, and forward writes into the array it is given."""

    name = "mutating-test"

    def forward(self, theta):
        if isinstance(theta, np.ndarray):
            theta[0] = 0.0
        return theta ** 2


class _Random(_Stateful):
    name = "random-test"

    def forward(self, theta):
        return anp.sin(theta) + np.random.default_rng().standard_normal(self.p)


@pytest.mark.parametrize("plugin, reason", [
    (_Stateful, "forward changed attribute 'calls'"),
    (_Mutating, r"in place \(1 entries, first u\[0\]"),
    (_Random, "two evaluations at the same theta differ"),
])
def test_check_fails_a_plugin_whose_forward_is_not_a_function_of_theta(plugin, reason):
    report = paramgeo.check(plugin(), n_points=1, llc=False)
    failed = [item for item in report.items if item.property == "function-of-theta"]
    assert not report.passed and len(failed) == 1 and not failed[0].passed
    assert failed[0].error == np.inf  # a failure, not a tolerance miss
    assert re.search(reason, failed[0].hint), failed[0].hint


def test_check_passes_function_of_theta_for_a_built_in():
    report = paramgeo.check(paramgeo.get("uut", d=3, r=2), n_points=1, llc=False)
    [item] = [i for i in report.items if i.property == "function-of-theta"]
    assert item.passed


# ------------------------------------------------------------------- precision, measured
class DeepLinear(torch.nn.Module):
    """x -> W3 W2 W1 x (widths 6, 4, 3, 5), computed in ``dtype`` inside forward."""

    def __init__(self, dtype):
        super().__init__()
        torch.manual_seed(0)
        self.dtype = dtype
        self.layers = torch.nn.ModuleList([torch.nn.Linear(a, b, bias=False) for a, b in
                                           [(6, 4), (4, 3), (3, 5)]])

    def forward(self, x):
        y = x.to(self.dtype)
        for layer in self.layers:
            y = F.linear(y, layer.weight.to(self.dtype))
        return y.to(torch.float64)


def test_a_float32_forward_inside_a_float64_interface_gets_the_float64_rank_and_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p32 = paramgeo.from_torch(DeepLinear(torch.float32), torch.eye(6))
        p64 = paramgeo.from_torch(DeepLinear(torch.float64), torch.eye(6))
    messages = [str(w.message) for w in caught if issubclass(w.category, NumericalDoubtWarning)]
    assert len(messages) == 1 and "torch module DeepLinear" in messages[0]
    assert "computes below float64 precision" in messages[0] and "float32" in messages[0]
    assert FLOAT32_UNIT / 100 < p32.noise < FLOAT32_UNIT * 100  # float32 round-off
    assert p64.noise < 1e-14 and p64.rank_policy is None
    assert p32.rank_policy.rtol == pytest.approx(1e3 * p32.noise)
    # r (n_0 + n_L - r) with r = 3: the generic rank of the float64 twin and of the closed form
    assert paramgeo.generic_rank(p32) == paramgeo.generic_rank(p64) == 3 * (6 + 5 - 3)
    reference = paramgeo.get("deep-linear", widths=(6, 4, 3, 5))
    assert paramgeo.generic_rank(reference) == 24
    from paramgeo.reports.description import describe

    assert describe(p32).generic_rank == 24
    # a policy given explicitly wins over the model's: at rtol 1e-9 round-off counts as rank
    from paramgeo.linalg.numerics import DEFAULT_POLICY

    assert paramgeo.generic_rank(p32, policy=DEFAULT_POLICY) > 24


def test_the_measured_noise_of_a_quantised_forward_is_the_rounding_variance(rng):
    # phi(theta) = round(g(theta) / q) q: a uniform rounding error of variance q^2 / 12
    q = 1e-6
    A = rng.standard_normal((200, 5))

    def quantised(theta):
        return np.round(np.tanh(A @ theta) / q) * q

    theta = rng.standard_normal(5)
    scale = float(np.sqrt(np.mean(np.tanh(A @ theta) ** 2)))
    noise = arithmetic_noise(quantised, theta, rng, step=1e-3, points=33)
    expected = q / np.sqrt(12) / scale
    assert 0.6 * expected < noise < 1.4 * expected
    # float64 arithmetic of the same map: round-off far below the float32 unit
    assert arithmetic_noise(lambda t: np.tanh(A @ t), theta, rng) < 1e-14
    # float32 arithmetic of it: of the order of the float32 unit
    f32 = arithmetic_noise(lambda t: np.tanh(A.astype(np.float32) @ t.astype(np.float32))
                           .astype(float), theta, rng)
    assert FLOAT32_UNIT / 100 < f32 < FLOAT32_UNIT * 100


def test_the_noise_policy_leaves_float64_alone_and_raises_rtol_above_round_off():
    from paramgeo.linalg.numerics import DEFAULT_POLICY

    assert noise_policy(1e-16) is DEFAULT_POLICY
    assert noise_policy(3e-8).rtol == pytest.approx(3e-5)


# ------------------------------------------------------------------ what a model is built from
def _linear():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 2))


def _jax_linear(params, x):
    return x @ params["W"]


@pytest.mark.parametrize("probe, message", [
    (None, "the probe is None, not real numbers"),
    (np.array([["a", "b", "c"]]), "the probe is of dtype <U1, not real numbers"),
    (np.array([[1.0, None, 2.0]], dtype=object), "the probe is of dtype object"),
    (np.eye(3) + 0j, "the probe is of dtype complex128"),
    (np.zeros((0, 3)), r"the probe is empty \(shape \(0, 3\)\)"),
])
def test_a_probe_that_is_not_a_batch_of_real_numbers_is_one_clear_error(probe, message):
    with pytest.raises(ShapeError, match=message):
        paramgeo.from_torch(_linear(), probe)
    with pytest.raises(ShapeError, match=message):
        paramgeo.from_jax(_jax_linear, {"W": np.ones((3, 2))}, probe)


def test_half_precision_probes_are_read_in_float64():
    X = torch.eye(3, dtype=torch.bfloat16)
    ref = paramgeo.from_torch(_linear(), torch.eye(3, dtype=torch.float64))
    for probe in (X, X.to(torch.float16)):
        p = paramgeo.from_torch(_linear(), probe)
        np.testing.assert_array_equal(p.forward_flat(p.theta0), ref.forward_flat(ref.theta0))
    q = paramgeo.from_jax(_jax_linear, {"W": jnp.ones((3, 2), dtype=jnp.bfloat16)},
                          jnp.eye(3, dtype=jnp.bfloat16))
    np.testing.assert_array_equal(q.forward(q.theta0), np.ones((3, 2)))


def test_a_device_whose_data_cannot_come_back_is_refused():
    with pytest.raises(ParamgeoError, match="cannot use the device.*meta"):
        paramgeo.from_torch(_linear(), torch.eye(3), device="meta")


@pytest.mark.parametrize("fn, params, message", [
    (lambda q, x: (x @ q["W"], x), {"W": np.ones((3, 2))}, "returned tuple, not one array"),
    (lambda q, x: {"y": x @ q["W"]}, {"W": np.ones((3, 2))}, "returned dict, not one array"),
    (_jax_linear, {"W": np.ones((3, 2)), "tag": "abc"}, "the parameter tag is of dtype <U3"),
    (_jax_linear, {"W": np.array([[1, None]] * 3, dtype=object)},
     "the parameter W is of dtype object"),
    (_jax_linear, {"W": np.ones((3, 2)) + 1j}, "the parameter W is of dtype complex128"),
])
def test_jax_outputs_and_params_that_are_not_real_arrays_are_refused(fn, params, message):
    with pytest.raises(ShapeError, match=message):
        paramgeo.from_jax(fn, params, np.eye(3))


def test_an_empty_output_is_refused_before_any_engine_runs():
    class Nothing(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x):
            return self.lin(x)[:, :0]

    with pytest.raises(ParamgeoError, match=r"the predictor shape \(3, 0\) has no entries"):
        paramgeo.from_torch(Nothing(), torch.eye(3))


def test_a_jax_function_computing_in_float32_is_measured_as_such(rng):
    def chain32(params, x):
        y = x.astype(jnp.float32)
        for W in params:
            y = y @ W.astype(jnp.float32).T
        return y.astype(jnp.float64)

    params = [rng.standard_normal((b, a)) for a, b in [(6, 4), (4, 3), (3, 5)]]
    with pytest.warns(NumericalDoubtWarning, match="computes below float64 precision"):
        p = paramgeo.from_jax(chain32, params, np.eye(6))
    assert FLOAT32_UNIT / 100 < p.noise < FLOAT32_UNIT * 100
    assert paramgeo.generic_rank(p) == 24


def test_parameters_without_entries_are_refused():
    with pytest.raises(ShapeError,
                       match=r"the parameters have no entries \(blocks \{'b': \(0,\)\}\)"):
        paramgeo.from_jax(lambda q, x: x + q["b"].sum(), {"b": np.zeros(0)}, np.ones(3))


def test_evaluations_differing_at_round_off_are_named_as_such():
    calls = []

    def wobbly(theta):  # sums in another order at every call: differs in the last bits
        calls.append(1)
        terms = np.outer(theta, [1.0, 1e-8, 3.0])
        return terms[::(-1) ** len(calls)].sum(axis=0)

    problem = function_of_theta(wobbly, np.array([0.1, 0.2, 0.3, 1e-9]),
                                np.array([1.0, 2.0, 3.0, 4.0]))
    assert problem.startswith("two evaluations at the same theta differ at round-off level")
    assert "torch.use_deterministic_algorithms(True)" in problem


def test_no_measurement_where_phi_is_not_finite(rng):
    from paramgeo.linalg.numerics import DEFAULT_POLICY

    with np.errstate(invalid="ignore"):
        noise = arithmetic_noise(lambda t: np.log(t - 10.0), np.ones(3), rng)
    assert np.isnan(noise) and noise_policy(noise) is DEFAULT_POLICY


CALLS = [0]


class ExitsLater(torch.nn.Module):
    """Calls sys.exit() from its 100th call on (after the checks at construction)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 100:
            raise SystemExit(3)
        return self.lin(x)


def test_sys_exit_inside_a_models_product_is_the_models_fault():
    CALLS[0] = 0
    p = paramgeo.from_torch(ExitsLater(), torch.eye(3), name="exits-later")
    CALLS[0] = 100
    with pytest.raises(PluginError, match=r"plugin 'exits-later': jacobian\(\) failed in torch "
                                          r".*SystemExit: 3"):
        p.jacobian(p.theta0)


def test_check_differences_a_float32_forward_at_the_step_its_round_off_allows():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalDoubtWarning)
        p32 = paramgeo.from_torch(DeepLinear(torch.float32), torch.eye(6))
    p64 = paramgeo.from_torch(DeepLinear(torch.float64), torch.eye(6))
    r32, r64 = (paramgeo.check(p, n_points=1, llc=False) for p in (p32, p64))
    [fd32] = [i for i in r32.items if i.property == "jacobian-fd"]
    [fd64] = [i for i in r64.items if i.property == "jacobian-fd"]
    assert r32.passed and r64.passed
    # h = noise^(1/3), tolerance 10 noise^(2/3): the balance of truncation and round-off
    assert fd32.tolerance == pytest.approx(10 * p32.noise ** (2 / 3))
    assert "measured round-off" in fd32.note and fd64.tolerance == 1e-5 and not fd64.note
    # the differences still resolve J: a Jacobian off by 1% of its norm would fail
    assert fd32.error < fd32.tolerance < 1e-2 / 10
