"""Small calls: every built-in's JVP at n <= 500 through the guard (checks on; inside
``paramgeo.trusted()``; and through the view ``with paramgeo.trusted(p) as q``) against its
one-line numpy expression, the floor a hand-written sweep would pay. Each timed call is a loop
of LOOP products (the calls take microseconds). Target: within 1.5x of the one-line expression
(ratio >= 1/1.5). monomial (polynomial algebra of the activations) and rope-attention
(position rotations) have no one-line numpy JVP and are left out. The checked call's floor is
the guard's result check, one inner product of J v with itself (about 0.25 us at these sizes)
plus a few comparisons: for matrix (J = I, the expression a copy of about 0.15 us) and
hadamard (two products, about 1.2 us) that floor alone is more than half of the expression, so
their checked rows stay below the target. Inside trusted() the call layer (one Python call
and a flag test) remains; the trusted view calls the plugin's own method with nothing between."""

import numpy as np

import paramgeo

LOOP = 200
TARGET = 1 / 1.5


def _cases():
    """(label, sizes, one-line JVP expression of (theta, v) for the parameterization p)."""
    def relu(p, t, v):
        X, h, d = p.X, p.width, p.d
        W, b, a = t[:h * d].reshape(h, d), t[h * d:h * (d + 1)], t[h * (d + 1):].reshape(h, -1)
        dW, db, da = v[:h * d].reshape(h, d), v[h * d:h * (d + 1)], v[h * (d + 1):].reshape(h, -1)
        Z = X @ W.T + b
        return (((Z > 0) * (X @ dW.T + db)) @ a + np.maximum(Z, 0) @ da).ravel()

    return [
        ("hadamard", dict(p=250), lambda p, t, v: t[250:] * v[:250] + t[:250] * v[250:]),
        ("deep-diagonal", dict(p=125, depth=4), lambda p, t, v: (lambda W, V: (
            V[0] * W[1] * W[2] * W[3] + W[0] * V[1] * W[2] * W[3] + W[0] * W[1] * V[2] * W[3]
            + W[0] * W[1] * W[2] * V[3]))(t.reshape(4, -1), v.reshape(4, -1))),
        ("matrix", dict(d=22), lambda p, t, v: v.copy()),
        ("uut", dict(d=50, r=10), lambda p, t, v: (lambda U, dU: (U @ dU.T + dU @ U.T).ravel())(
            t.reshape(50, 10), v.reshape(50, 10))),
        ("uvt", dict(m=25, n=25, r=10), lambda p, t, v: (
            v[:250].reshape(25, 10) @ t[250:].reshape(25, 10).T
            + t[:250].reshape(25, 10) @ v[250:].reshape(25, 10).T).ravel()),
        ("lora", dict(m=25, n=25, r=10), lambda p, t, v: (
            v[:250].reshape(25, 10) @ t[250:].reshape(25, 10).T
            + t[:250].reshape(25, 10) @ v[250:].reshape(25, 10).T).ravel()),
        ("qk-attention", dict(d=25, r=5, heads=2), lambda p, t, v: (
            v[:250].reshape(2, 25, 5) @ t[250:].reshape(2, 25, 5).transpose(0, 2, 1)
            + t[:250].reshape(2, 25, 5) @ v[250:].reshape(2, 25, 5).transpose(0, 2, 1)).ravel()),
        ("deep-linear", dict(widths=(10, 10, 10, 10)), lambda p, t, v: (
            t[200:].reshape(10, 10) @ t[100:200].reshape(10, 10) @ v[:100].reshape(10, 10)
            + t[200:].reshape(10, 10) @ v[100:200].reshape(10, 10) @ t[:100].reshape(10, 10)
            + v[200:].reshape(10, 10) @ t[100:200].reshape(10, 10) @ t[:100].reshape(10, 10)
        ).ravel()),
        ("relu-net", dict(d=10, width=38, outputs=2, n_inputs=20), relu),
    ]


def bench(row, repeats):
    rng = np.random.default_rng(0)
    for name, sizes, expr in _cases():
        p = paramgeo.get(name, **sizes)
        theta, v = p.random_point(rng), rng.standard_normal(p.n)

        def checked(p=p, theta=theta, v=v):
            for _ in range(LOOP):
                out = p.jvp(theta, v)
            return out

        def trusted(p=p, theta=theta, v=v):
            with paramgeo.trusted():
                for _ in range(LOOP):
                    out = p.jvp(theta, v)
            return out

        def view(p=p, theta=theta, v=v):
            with paramgeo.trusted(p) as q:
                for _ in range(LOOP):
                    out = q.jvp(theta, v)
            return out

        def numpy(p=p, theta=theta, v=v, expr=expr):
            for _ in range(LOOP):
                out = expr(p, theta, v)
            return out

        tag = f"{name} n={p.n}: JVP x{LOOP}"
        row(f"{tag} (checks on) vs one-line numpy", checked, numpy, 3 * repeats, target=TARGET)
        row(f"{tag} (trusted) vs one-line numpy", trusted, numpy, 3 * repeats, target=TARGET)
        row(f"{tag} (trusted view) vs one-line numpy", view, numpy, 3 * repeats, target=TARGET)
