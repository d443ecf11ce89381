"""Gradient descent theta_{t+1} = theta_t - eta_t J^T grad ell(phi(theta_t)), with step-size
schedules and seeded minibatches (:func:`gradient_descent`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Optional, Union

import numpy as np

from ..errors import ParamgeoError
from ..losses.predictor import pullback, value_and_grad
from ..dynamics.trajectory import _check_stops, _finish, _progress_callback

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..losses.predictor import Loss
    from ..dynamics.optimizers import Optimizer
    from ..contract.parameterization import Parameterization
    from ..dynamics.trajectory import Trajectory


def schedule(kind: str, lr: float, steps: Optional[int] = None) -> Callable[[float], float]:
    """A step-size schedule eta(t) for :func:`gradient_descent`.

    * ``constant``: eta_t = lr;
    * ``inverse``:  eta_t = lr / (1 + t / tau), tau = steps / 10 (Robbins-Monro type decay);
    * ``cosine``:   eta_t = lr (1 + cos(pi t / steps)) / 2 (Loshchilov and Hutter 2017);
    * ``step``:     eta_t = lr * 0.1^floor(3 t / steps) (three equal stages).

    Args:
        kind: "constant", "inverse", "cosine" or "step".
        lr: the initial step size (> 0).
        steps: the run's number of steps (needed by all but "constant").

    Returns:
        The function t -> eta_t.

    Raises:
        ParamgeoError: an unknown kind, a step size that is not positive, or no steps.

    Examples:
        >>> from paramgeo.flows import schedule
        >>> eta = schedule("cosine", 0.1, steps=100)
        >>> eta(0), eta(50), eta(100)
        (0.1, 0.05, 0.0)
    """
    if not (np.isfinite(lr) and lr > 0):
        raise ParamgeoError(f"the step size must be a positive number, got {lr}")
    if kind == "constant":
        return lambda t: lr
    if steps is None or steps <= 0:
        raise ParamgeoError(f"the {kind} schedule needs the number of steps")
    if kind == "inverse":
        tau = max(steps / 10.0, 1.0)
        return lambda t: lr / (1.0 + t / tau)
    if kind == "cosine":
        return lambda t: lr * 0.5 * (1.0 + math.cos(math.pi * min(t, steps) / steps))
    if kind == "step":
        return lambda t: lr * 0.1 ** math.floor(3 * t / steps)
    raise ParamgeoError(f"unknown schedule {kind!r}; choose constant, inverse, cosine or step")


#: default number of recorded steps of a long descent run
MAX_RECORDS = 1000
#: default cap on the floats the recorded parameters of a run may hold (0.8 GB)
RECORD_FLOATS = 10 ** 8


def default_record_every(steps: int, n: int) -> int:
    """The default recording interval: every step while steps <= MAX_RECORDS, else about
    MAX_RECORDS evenly spaced records, and never more than RECORD_FLOATS / n records (at least 2)."""
    records = max(2, min(MAX_RECORDS, RECORD_FLOATS // max(int(n), 1)))
    return max(1, math.ceil(steps / records))


def gradient_descent(param: Parameterization, loss: Loss, theta0: ArrayLike, steps: int, lr: float,
                     *, record_every: Optional[int] = None, stop_loss: Optional[float] = None,
                     stop_grad: Optional[float] = None, batch_size: Optional[int] = None,
                     seed: Optional[int] = None,
                     progress: Union[bool, Callable[[int, int], None]] = False,
                     conserved: bool = True, optimizer: Optional[Optimizer] = None,
                     callback: Optional[Callable[[int, np.ndarray], np.ndarray]] = None
                     ) -> Trajectory:
    """Gradient descent theta_{t+1} = theta_t - lr_t J^T grad ell(phi(theta_t)), ``steps`` steps.

    With ``optimizer`` the step direction g is replaced by its update D_t(g) (sign, smoothed
    sign, Adam: :mod:`paramgeo.dynamics.optimizers`); with ``batch_size`` g is the gradient of
    the loss on ``batch_size`` samples drawn without replacement (stochastic gradient descent).
    The losses, predictors and gradient norms of the records are evaluated only when read.

    Args:
        param: the parameterization phi: R^n -> R^m.
        loss: the loss ell on predictors (built from samples for ``batch_size``).
        theta0: the start, shape (n,).
        steps: the number of steps.
        lr: the step size, or a schedule lr(t) (:func:`schedule`).
        record_every: record every this many steps (and the last); default every step of a
            short run, about ``MAX_RECORDS`` of a long one, fewer beyond ``RECORD_FLOATS``.
        stop_loss: stop when the loss falls below it.
        stop_grad: stop when the full gradient norm falls below it.
        batch_size: minibatch size (SGD); None: the full gradient.
        seed: seed of the minibatches.
        progress: True for a progress bar, or progress(done, total) after every step.
        conserved: record the quadratic conserved quantities of the symmetry group.
        optimizer: a :class:`paramgeo.dynamics.optimizers.Optimizer` (None: plain gradient
            steps).
        callback: callback(t, theta), called after step t (t = 1, 2, ...), returns the point
            the descent continues from: theta itself, or a point that computes the same
            predictor, e.g. a symmetry teleportation every k steps
            (:class:`paramgeo.quotient.Teleporter`; such a move changes the conserved
            quantities, whose drift the trajectory then reports).

    Returns:
        The :class:`paramgeo.dynamics.trajectory.Trajectory` of the recorded steps (``times``
        are step indices).

    Raises:
        ParamgeoError: a bad number of steps, step size, record_every, stop level or batch
            size.
        ShapeError: theta0 is not n finite numbers.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.flows import gradient_descent
        >>> from paramgeo.losses.predictor import LinearMeasurements
        >>> p = paramgeo.get("hadamard", p=2)                   # phi(u, v) = u * v
        >>> run = gradient_descent(p, LinearMeasurements(np.eye(2), [1.0, 2.0]), np.ones(4),
        ...                        steps=2000, lr=0.1)
        >>> np.round(p.forward(run.thetas[-1]), 6)
        array([1., 2.])
    """
    theta = param.as_theta(theta0).copy()
    if int(steps) != steps or steps < 0:
        raise ParamgeoError(f"the number of steps must be a non-negative integer, got {steps}")
    steps = int(steps)
    if record_every is None:
        record_every = default_record_every(steps, param.n)
    if int(record_every) != record_every or record_every < 1:
        raise ParamgeoError(f"record_every must be a positive integer, got {record_every}")
    _check_stops(stop_loss, stop_grad)
    value, grad = pullback(param, loss)
    step_grad = grad
    rng = None
    if batch_size is not None:
        if loss.N is None:
            loss.minibatch(np.arange(1))  # raises the readable error
        assert loss.N is not None
        if not 1 <= batch_size <= loss.N:
            raise ParamgeoError(f"the batch size must be between 1 and N = {loss.N}, "
                                f"got {batch_size}")
        rng = np.random.default_rng(seed)
    schedule_fn = lr if callable(lr) else (lambda _t: lr)
    direction = optimizer.start(value, param.n) if optimizer is not None else None
    # full-batch steps evaluate the loss with the gradient (one pass): the loss and gradient
    # norm of each recorded theta are kept when the next step computes them (nan until then,
    # and for the last record, whose values are evaluated if read)
    both = value_and_grad(param, loss) if rng is None else None
    times, thetas, losses, norms = [0], [theta.copy()], [np.nan], [np.nan]
    message = f"completed {steps} steps"
    n_evals = 0
    report, close = _progress_callback(progress, f"gradient descent, {steps} steps")
    interrupted = False
    try:
        for t in range(steps):
            if rng is not None:
                idx = rng.choice(int(loss.N), size=batch_size, replace=False)
                step_grad = pullback(param, loss.minibatch(idx))[1]
            with np.errstate(over="ignore", invalid="ignore"):
                if both is None:
                    g = step_grad(theta)
                else:
                    current, g = both(theta)
                    if times[-1] == t:  # theta is the last record
                        losses[-1], norms[-1] = current, math.sqrt(g @ g)
                if direction is not None:
                    g = direction(t, theta, g)
                theta = theta - schedule_fn(t) * g
            n_evals += 1
            if report is not None:
                report(t + 1, steps)
            if not np.all(np.isfinite(theta)):
                raise ParamgeoError(
                    f"gradient descent diverged at step {t + 1}; lower the step size")
            if callback is not None:
                theta = param.as_theta(callback(t + 1, theta))
            if (t + 1) % record_every == 0 or t + 1 == steps:
                times.append(t + 1)
                thetas.append(theta.copy())
                losses.append(np.nan)
                norms.append(np.nan)
            stop = None
            if stop_loss is not None and value(theta) < stop_loss:
                stop = f"loss below {stop_loss} at step {t + 1}"
            elif stop_grad is not None and np.linalg.norm(grad(theta)) < stop_grad:
                stop = f"gradient norm below {stop_grad} at step {t + 1}"
            if stop:
                message = stop
                if times[-1] != t + 1:
                    times.append(t + 1)
                    thetas.append(theta.copy())
                    losses.append(np.nan)
                    norms.append(np.nan)
                break
    except KeyboardInterrupt:  # Ctrl-C: keep the steps finished, record where it stopped
        interrupted, message = True, f"interrupted after {n_evals} of {steps} steps"
        if times[-1] != n_evals:
            times.append(n_evals)
            thetas.append(theta.copy())
            losses.append(np.nan)
            norms.append(np.nan)
    finally:
        close()
    method = "gd" if rng is None else f"sgd (batch {batch_size}, seed {seed})"
    if optimizer is not None:
        method = f"{optimizer.name} ({method})"
    return _finish(param, value, grad, method, times, thetas, not interrupted, message, n_evals,
                   conserved, interrupted,
                   known={"losses": np.array(losses), "grad_norms": np.array(norms)}
                   if len(losses) == len(thetas) == len(norms) else None)
