"""Benchmark rows for the framework adapters: the JVP and VJP of ``paramgeo.from_torch`` and
``paramgeo.from_jax`` models (host numpy float64 in and out) against the framework's own
product on its own arrays (torch.func.jvp/vjp on tensors, jitted jax.jvp/vjp on device
arrays), at n of about 1e5 parameters. The ratio framework / adapter is the adapter's overhead
(target: >= 1/1.3, the adapter within 1.3x of the framework). Both run on one CPU thread
(torch by OMP_NUM_THREADS=1 from run.py, XLA by the flags below, set before jax is imported):
threaded runtimes on a loaded machine add noise that is neither's.

The JAX rows: XLA's CPU client uses a host buffer in place only when it is 64-byte aligned,
and numpy's large arrays are usually only 16-byte aligned, so JAX copies host arrays into
buffers of its own on every call; torch.from_numpy shares the array. The adapter passes
aligned arrays as they are (the point here comes from its random_point, which aligns its
points) and stages the others, the tangent here, through aligned host buffers (one copy by
numpy, as costly as JAX's own), so what it adds over JAX's product on arrays already on its
device is that copy and the guard's checks (target for the JAX rows: at least 0.85x). The two
"host arrays" rows give the jitted products the adapter's own host numpy arrays instead."""

import os

import numpy as np

import paramgeo

WIDTHS = (100, 300, 200, 10)  # 92,510 parameters with biases
BATCH = 32
TARGET = 1 / 1.3
JAX_TARGET = 0.85

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")


def _torch_rows(row, repeats, rng):
    import torch

    layers = []
    for a, b in zip(WIDTHS, WIDTHS[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.Tanh()]
    net = torch.nn.Sequential(*layers[:-1])
    probe = rng.standard_normal((BATCH, WIDTHS[0]))
    p = paramgeo.from_torch(net, probe)
    theta, v, w = p.random_point(rng), rng.standard_normal(p.n), rng.standard_normal(p.m)

    model = net.double()
    x = torch.from_numpy(probe)
    shapes = [(k, q.shape, q.numel()) for k, q in model.named_parameters()]

    def f(t):
        params, start = {}, 0
        for k, shape, size in shapes:
            params[k] = t[start:start + size].view(shape)
            start += size
        return torch.func.functional_call(model, params, (x,)).reshape(-1)

    tt, tv, tw = (torch.from_numpy(a.copy()) for a in (theta, v, w))
    tag = f"torch MLP n={p.n}:"
    row(f"{tag} adapter JVP vs torch.func.jvp", lambda: p.jvp(theta, v),
        lambda: torch.func.jvp(f, (tt,), (tv,))[1].numpy(), repeats, target=TARGET)
    row(f"{tag} adapter VJP vs torch.func.vjp", lambda: p.vjp(theta, w),
        lambda: torch.func.vjp(f, tt)[1](tw)[0].numpy(), repeats, target=TARGET)


def _jax_rows(row, repeats, rng):
    import jax
    import jax.numpy as jnp

    def mlp(params, x):
        for k, (W, b) in enumerate(params):
            x = x @ W.T + b
            if k + 1 < len(params):
                x = jnp.tanh(x)
        return x

    params = [(rng.standard_normal((b, a)) / np.sqrt(a), np.zeros(b))
              for a, b in zip(WIDTHS, WIDTHS[1:])]
    probe = rng.standard_normal((BATCH, WIDTHS[0]))
    p = paramgeo.from_jax(mlp, params, probe)
    theta, v, w = p.random_point(rng), rng.standard_normal(p.n), rng.standard_normal(p.m)
    from paramgeo.adapters._jax import _x64

    with _x64(jax):
        shapes = [W.shape for layer in params for W in layer]
        treedef = jax.tree_util.tree_structure(params)

        def f(t):
            parts, start = [], 0
            for shape in shapes:
                size = int(np.prod(shape))
                parts.append(jnp.reshape(t[start:start + size], shape))
                start += size
            return jnp.reshape(mlp(jax.tree_util.tree_unflatten(treedef, parts), probe), -1)

        jvp = jax.jit(lambda t, u: jax.jvp(f, (t,), (u,))[1])
        vjp = jax.jit(lambda t, c: jax.vjp(f, t)[1](c)[0])
        jt, jv, jw = (jnp.asarray(a) for a in (theta, v, w))

        def own_jvp():
            return jvp(jt, jv).block_until_ready()

        def own_vjp():
            return vjp(jt, jw).block_until_ready()

        def host_jvp():
            return np.asarray(jvp(theta, v))

        def host_vjp():
            return np.asarray(vjp(theta, w))

        own_jvp(), own_vjp(), host_jvp(), host_vjp()
        tag = f"jax MLP n={p.n}:"
        row(f"{tag} adapter JVP vs jitted jax.jvp", lambda: p.jvp(theta, v), own_jvp, repeats,
            target=JAX_TARGET)
        row(f"{tag} adapter VJP vs jitted jax.vjp", lambda: p.vjp(theta, w), own_vjp, repeats,
            target=JAX_TARGET)
        # the same jitted products called on the same host numpy arrays as the adapter: what
        # the adapter itself adds, without the copies into XLA's buffers that both then pay
        row(f"{tag} adapter JVP vs jitted jax.jvp, host arrays", lambda: p.jvp(theta, v),
            host_jvp, repeats, target=TARGET)
        row(f"{tag} adapter VJP vs jitted jax.vjp, host arrays", lambda: p.vjp(theta, w),
            host_vjp, repeats, target=TARGET)


def bench(row, repeats):
    rng = np.random.default_rng(0)
    repeats = max(repeats, 100)  # ratios near 1 with a 1.3x limit: medians of many rounds
    _torch_rows(row, repeats, rng)
    _jax_rows(row, repeats, rng)
