"""The loss of the LLC estimator as batches: the full loss L_n of n samples written as the
weighted sum L_n(w) = sum_b (n_b / n) L_b(w) of the losses of B batches of n_b samples each.

A batch is a pair (parameterization, loss): for a loss built from samples (``Regression``,
``LinearMeasurements``, ...) the parameterization itself and ``loss.minibatch(indices)``; for a
model evaluated on data (``data=(X, Y)`` or an iterable of (x, y) batches, such as a torch
``DataLoader``) the model on the batch's inputs, ``param.on_inputs(x_b)`` (the contract's
capability; framework models from :func:`paramgeo.from_torch` / :func:`paramgeo.from_jax`
declare it), with a loss of its outputs, ``SquaredError(y_b)`` (``"mse"``) or
``CrossEntropy(y_b)`` (``"cross-entropy"``). Minibatch SGLD draws batch b with probability
n_b / n at every step, so that E_b[L_b(w)] = L_n(w) and E_b[grad L_b(w)] = grad L_n(w)
(Welling and Teh 2011).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

import numpy as np

from ..errors import ParamgeoError, ShapeError
from ..losses.predictor import Loss, batched_value_and_grad, pullback
from ..losses.outputs import CrossEntropy, SquaredError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization

#: losses of a model's outputs on data, by the names ``estimate_llc(loss=...)`` takes
OUTPUT_LOSSES = {"mse": SquaredError, "cross-entropy": CrossEntropy}


@dataclasses.dataclass(kw_only=True)
class Batches:
    """B batches: ``params[b]`` and ``losses[b]`` (the loss L_b through its parameterization),
    ``weights[b]`` = n_b / n (summing to 1), ``n`` the number of samples."""

    params: list
    losses: list
    weights: np.ndarray
    n: int

    def __len__(self):
        return len(self.params)

    def value_grads(self) -> list[tuple[Callable[[Any], float], Callable[[Any], Any]]]:
        """Per batch, w -> (L_b(w), grad L_b(w)) (:func:`paramgeo.losses.pullback`)."""
        return [pullback(p, loss) for p, loss in zip(self.params, self.losses)]

    def batched(self, single: bool = False) -> list[Any]:
        """Per batch, the batched (K, n) -> (values, gradients) of
        :func:`paramgeo.losses.batched_value_and_grad` (``single``: the model in float32 where
        it offers it)."""
        return [batched_value_and_grad(p, loss, single)
                for p, loss in zip(self.params, self.losses)]

    @property
    def single_precision(self):
        """Whether every batch's model computes in float32 when asked (torch models)."""
        return all(getattr(p, "single_precision", False) for p in self.params)

    def full(self) -> tuple[Callable[[Any], float], Callable[[Any], Any]]:
        """(L_n, grad L_n) as the weighted sums over the batches."""
        pairs = self.value_grads()

        def value(w):
            return float(sum(c * v(w) for c, (v, _) in zip(self.weights, pairs)))

        def grad(w):
            return sum(c * g(w) for c, (_, g) in zip(self.weights, pairs))

        return value, grad


def _array(a, what):
    """A numpy array from an array-like (numpy, a CPU framework tensor, nested lists)."""
    if hasattr(a, "detach"):  # a framework tensor that may carry gradients
        a = a.detach()
    if hasattr(a, "cpu"):
        a = a.cpu()
    try:
        out = np.asarray(a)
    except Exception as exc:  # noqa: BLE001 - any conversion failure is the user's input
        raise ShapeError(f"estimate_llc: the {what} of a batch is not an array "
                         f"({type(a).__name__}: {exc}); give numpy arrays or tensors") from None
    if out.dtype == object or out.ndim == 0:
        raise ShapeError(f"estimate_llc: the {what} of a batch must be an array of shape "
                         f"(B, ...), got {type(a).__name__} of shape {out.shape}")
    return out


def _pairs(data):
    """The (x, y) batches of ``data``: a pair of arrays (one batch) or an iterable of pairs."""
    if isinstance(data, tuple) and len(data) == 2 and not isinstance(data[0], tuple):
        return [(_array(data[0], "inputs X"), _array(data[1], "targets Y"))]
    try:
        items = list(data)
    except TypeError:
        raise ShapeError(f"estimate_llc: data must be (X, Y) or an iterable of (x, y) "
                         f"batches (a torch DataLoader works), got {type(data).__name__}") \
            from None
    pairs = []
    for k, item in enumerate(items):
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise ShapeError(f"estimate_llc: batch {k} of data is {type(item).__name__}; each "
                             "batch must be a pair (x, y) of inputs and targets")
        pairs.append((_array(item[0], "inputs x"), _array(item[1], "targets y")))
    if not pairs:
        raise ShapeError("estimate_llc: data has no batches")
    return pairs


def _split(N, batch_size, seed):
    """Index sets of a seeded random partition of range(N) into batches of ``batch_size``
    (the last one smaller where batch_size does not divide N)."""
    if (isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer))
            or not 1 <= batch_size):
        raise ParamgeoError(f"estimate_llc: batch_size={batch_size!r} must be a positive "
                            "integer (or None for the full batch)")
    order = np.random.default_rng(np.random.SeedSequence([int(seed), 7])).permutation(N)
    return [np.sort(order[i:i + batch_size]) for i in range(0, N, int(batch_size))]


def make_batches(param: Parameterization, loss: Union[str, Loss], data: Any = None,
                 batch_size: Optional[int] = None, seed: int = 0) -> Batches:
    """The :class:`Batches` of the estimator's loss (see the module docstring): ``loss`` a
    :class:`paramgeo.losses.Loss` (``data`` None) or the name of a loss of the model's outputs
    (``"mse"``, ``"cross-entropy"``) with ``data``; ``batch_size`` splits the samples into
    batches of that size (a seeded random partition), for arrays only (an iterable's batches
    are taken as they come, read once)."""
    if data is None:
        if not isinstance(loss, Loss):
            raise ParamgeoError(
                f"estimate_llc: loss={loss!r} without data; give data=(X, Y) (or an iterable "
                f"of batches) with loss 'mse' or 'cross-entropy', or a paramgeo Loss object")
        if batch_size is None:
            return Batches(params=[param], losses=[loss], weights=np.ones(1), n=loss.N)
        if loss.N is None:
            raise ParamgeoError(f"estimate_llc: {type(loss).__name__} is not built from samples, "
                                "so it has no minibatches; give batch_size=None")
        parts = _split(loss.N, batch_size, seed)
        return Batches(params=[param] * len(parts), losses=[loss.minibatch(idx) for idx in parts],
                       weights=np.array([len(idx) for idx in parts], float) / loss.N, n=loss.N)
    if isinstance(loss, Loss) or loss not in OUTPUT_LOSSES:
        raise ParamgeoError(f"estimate_llc: with data, loss must be one of "
                            f"{', '.join(map(repr, OUTPUT_LOSSES))} (a loss of the model's "
                            f"outputs), got {loss!r}; a Loss object carries its own data: give "
                            "it without data (and batch_size for minibatches)")
    if not param.provides("on_inputs"):
        raise ParamgeoError(
            f"estimate_llc: {param.name} cannot be evaluated on data inputs (it does not "
            "provide on_inputs); for a model of your own use paramgeo.from_torch or "
            "paramgeo.from_jax, and for a matrix predictor B x use loss=Regression(X, Y)")
    pairs = _pairs(data)
    if batch_size is not None:
        if len(pairs) > 1:
            raise ParamgeoError("estimate_llc: batch_size splits arrays (X, Y); an iterable of "
                                "batches is used as it comes: give batch_size=None")
        X, Y = pairs[0]
        if len(X) != len(Y):
            raise ShapeError(f"estimate_llc: {len(X)} inputs but {len(Y)} targets; X and Y "
                             "must have one row per sample")
        pairs = [(X[idx], Y[idx]) for idx in _split(len(X), batch_size, seed)]
    kind = OUTPUT_LOSSES[loss]
    params, losses, sizes = [], [], []
    for k, (x, y) in enumerate(pairs):
        if len(x) != len(y):
            raise ShapeError(f"estimate_llc: batch {k} has {len(x)} inputs but {len(y)} "
                             "targets; each batch needs one target per input")
        p_b = param.on_inputs(x)
        loss_b = kind(y) if kind is SquaredError else kind(y, classes=p_b.m // len(y))
        if kind is SquaredError and loss_b.m != p_b.m:
            raise ShapeError(f"estimate_llc: batch {k}: the model gives outputs of shape "
                             f"{p_b.predictor_shape} on its {len(x)} inputs, the targets have "
                             f"shape {np.shape(y)}; give targets of the outputs' shape")
        loss_b.check_dim(p_b)
        params.append(p_b)
        losses.append(loss_b)
        sizes.append(len(y))
    n = int(sum(sizes))
    return Batches(params=params, losses=losses, weights=np.array(sizes, float) / n, n=n)


def control_variates(fns: Sequence[Callable[[Any], Any]], weights: ArrayLike, w_star: ArrayLike,
                     L_star: float, budget: int) -> tuple[Any, Any]:
    """(shift, grad_shift) of minibatch SGLD (Baker, Fearnhead, Fox and Nemeth 2019, "Control
    variates for stochastic gradient MCMC"): per batch b, shift[b] = L_n(w*) - L_b(w*) and
    grad_shift[b] = grad L_n(w*) - grad L_b(w*), grad L_n(w*) = sum_b (n_b / n) grad L_b(w*),
    read by the batched ``fns`` (in the chains' precision) at w*. L_b(w) + shift[b] and
    grad L_b(w) + grad_shift[b] are unbiased for L_n(w) and grad L_n(w) over the draw of b
    (E_b[L_b] = L_n) and exact at w*: their variances are those of L_b(w) - L_b(w*) and
    grad L_b(w) - grad L_b(w*), small near w*. grad_shift is None for one batch, or where
    the B x n numbers exceed ``budget`` (memory)."""
    at = [f(np.asarray(w_star, float)[None]) for f in fns]
    shift = np.array([L_star - float(L[0]) for L, _ in at])
    if len(fns) == 1 or len(fns) * np.size(w_star) > budget:
        return shift, None
    G = np.array([g[0] for _, g in at], float)
    return shift, np.asarray(weights, float) @ G - G


def batch_picker(weights: NDArray[np.float64], rng: np.random.Generator) -> Callable[[], int]:
    """step -> the index of the batch of that step, drawn with probabilities ``weights``
    (always 0 for one batch, drawing nothing from ``rng``)."""
    if len(weights) == 1:
        return lambda: 0
    cum = np.cumsum(weights)
    cum[-1] = 1.0
    return lambda: int(np.searchsorted(cum, rng.uniform(), side="right"))
