"""Gradient descent theta_{t+1} = theta_t - eta_t J^T grad ell(phi(theta_t)), with step-size
schedules and seeded minibatches (:func:`gradient_descent`)."""

import math

import numpy as np

from ..errors import ParamgeoError
from ..losses.predictor import pullback, value_and_grad
from ..dynamics.trajectory import _check_stops, _finish, _progress_callback


def schedule(kind, lr, steps=None):
    """A step-size schedule eta(t) for :func:`gradient_descent`.

    * ``constant``: eta_t = lr;
    * ``inverse``:  eta_t = lr / (1 + t / tau), tau = steps / 10 (Robbins-Monro type decay);
    * ``cosine``:   eta_t = lr (1 + cos(pi t / steps)) / 2 (Loshchilov and Hutter 2017);
    * ``step``:     eta_t = lr * 0.1^floor(3 t / steps) (three equal stages).
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


def default_record_every(steps, n):
    """The default recording interval: every step while steps <= MAX_RECORDS, else about
    MAX_RECORDS evenly spaced records, and never more than RECORD_FLOATS / n records (at least 2)."""
    records = max(2, min(MAX_RECORDS, RECORD_FLOATS // max(int(n), 1)))
    return max(1, math.ceil(steps / records))


def gradient_descent(param, loss, theta0, steps, lr, *, record_every=None, stop_loss=None,
                     stop_grad=None, batch_size=None, seed=None, progress=False, conserved=True,
                     optimizer=None, callback=None):
    """theta_{t+1} = theta_t - lr_t J^T grad ell(phi(theta_t)) for ``steps`` steps.

    ``lr`` is a float or a callable ``lr(t)`` (a schedule, see :func:`schedule`). With
    ``batch_size`` the gradient of step t is that of the loss on ``batch_size`` samples drawn
    without replacement by ``numpy.random.default_rng(seed)`` (stochastic gradient descent;
    needs a loss built from samples). Records every ``record_every`` steps (and the last); the
    default records every step of a short run and about :data:`MAX_RECORDS` evenly spaced steps
    of a long one, fewer when n is so large that the parameters would pass
    :data:`RECORD_FLOATS` floats (a record costs a copy of theta; the losses, predictors and
    gradient norms of the records are evaluated only when read, see
    :class:`paramgeo.dynamics.trajectory.Trajectory`).
    ``stop_loss``/``stop_grad`` stop early when the loss/the full gradient norm falls below
    them (checked at recorded steps and, when given, every step). ``progress``: a callable
    ``progress(done, total)`` called after every step, or True for paramgeo's progress bar.
    ``optimizer`` (a :class:`paramgeo.dynamics.optimizers.Optimizer`) replaces the step direction g by
    its update D_t(g): theta_{t+1} = theta_t - lr_t D_t(g_t) (sign, smoothed sign, Adam).
    ``callback(t, theta)``, called after step t (t = 1, 2, ...), returns the point the descent
    continues from: theta itself, or a point that computes the same predictor, e.g. a symmetry
    teleportation every k steps (:class:`paramgeo.quotient.Teleporter`; such a move changes
    the conserved quantities, whose drift the trajectory then reports).
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
                idx = rng.choice(loss.N, size=batch_size, replace=False)
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
