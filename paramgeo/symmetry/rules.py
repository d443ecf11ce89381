"""Layer rules: the symmetries a layer creates with its neighbours, as generators on flat theta.

A reader of a computational graph (:mod:`paramgeo.adapters`) finds *units* (a neuron of a dense
layer, a channel of a convolution, an attention head, a feature of a normalisation layer) and,
for each, the flat positions of theta that touch it. The rules below turn those positions into
symmetry generators; every group built from them is verified against phi before it is
returned (:func:`paramgeo.symmetry.verify_group`), so a rule that does not hold for the model
at hand is refused, never trusted.

A unit u is described by index arrays (positions in theta):

* ``inp``: the parameters of the last affine stage that produces u (a dense layer's row and
  bias, a convolution's output-channel kernel and bias, or, when a normalisation layer
  follows, its scale and shift of u);
* ``out``: the parameters that read u (the next layers' columns or input-channel kernels).

Rules, with their references:

* positively homogeneous activation (ReLU, leaky ReLU; max pooling commutes): inp -> c inp,
  out -> out / c, c > 0 (Neyshabur, Salakhutdinov, Srebro 2015, "Path-SGD");
* odd activation (tanh): the sign flip inp -> -inp, out -> -out (Chen, Lu, Hecht-Nielsen 1993);
* no activation between two affine maps: GL(h) on the units' columns (Arora, Cohen, Hazan
  2018; :func:`paramgeo.symmetry.hidden_layer_group`), or for an elementwise affine producer
  (a normalisation layer's scale and shift) the rescaling of each feature (c in R\\{0});
* batch normalisation in eval mode after a layer with fixed statistics (mu, sigma =
  sqrt(var + eps)): with y = w . x + b the unit computes gamma (y - mu) / sigma + beta, so
  (w, b, gamma, beta) -> (s w, s b, gamma / s, beta + gamma mu (1/s - 1) / sigma) and
  (b, beta) -> (b + t, beta - gamma t / sigma) leave it unchanged (the scale invariance of
  batch normalisation, Ioffe and Szegedy 2015; van Laarhoven 2017, "L2 regularization versus
  batch and weight normalization"): the generators X(theta) = (w, b, -gamma, -gamma mu / sigma)
  and (0, 1, 0, -gamma / sigma);
* layer normalisation LN(z) = LN(z + t 1): a layer writing z = ... + W a + b into a stream read
  only by LN has b -> b + t 1 and W -> W + 1 u^T as symmetries (Ba, Kiros, Hinton 2016;
  the mean-shift invariance);
* multi-head attention (Vaswani et al. 2017) per head h of width d: GL(d) on (W_Q^h, W_K^h)
  with their biases (scores q^T k invariant under q -> A^T q, k -> A^{-1} k), GL(d) on
  (W_V^h, W_O^h), the key bias b_K^h (it adds q_i . b_K to every score of row i, which softmax
  removes), and the value bias moved into the output bias (softmax rows sum to 1:
  b_V^h -> b_V^h + t, b_O -> b_O - W_O^h t); heads permute (Elhage et al. 2021, "A mathematical
  framework for transformer circuits", for the QK and OV circuits);
* permutations of units with identical roles (twins), as a :class:`UnitPermutationGroup`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import numpy as np

from .actions import FieldGroup, ShearGroup, UnitPermutationGroup
from .groups import GeneralLinearGroup, ScalingTorus, SignedPermutationGroup

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from .groups import SymmetryGroup


def _flat(*arrays):
    return np.concatenate([np.ravel(np.asarray(a, dtype=int)) for a in arrays if a is not None])


def rescaling_torus(units: Sequence[tuple[Any, Any]], n: int, signed: bool = False,
                    name: Optional[str] = None) -> ScalingTorus:
    """The torus of unit rescalings: one row per unit, +1 on ``inp``, -1 on ``out`` (exponents
    of :class:`ScalingTorus`). ``units`` is a list of (inp, out) index arrays. ``signed``: c in
    R\\{0} (no activation) instead of c > 0 (positively homogeneous activations)."""
    rows = np.zeros((len(units), n), dtype=int)
    for k, (inp, out) in enumerate(units):
        rows[k, _flat(inp)] = 1
        rows[k, _flat(out)] = -1
    return ScalingTorus(rows, signed=signed, name=name)


def sign_flips(units: Sequence[tuple[Any, Any]], n: int) -> SignedPermutationGroup:
    """The sign flips (inp, out) -> -(inp, out) of units with an odd activation, as a
    :class:`SignedPermutationGroup` of (Z_2)^k."""
    gens = []
    for inp, out in units:
        signs = np.ones(n)
        signs[_flat(inp, out)] = -1.0
        gens.append((np.arange(n), signs))
    k = len(units)
    name = f"(Z_2)^{k}" if k > 1 else "Z_2"
    return SignedPermutationGroup(name, gens, n)


def batchnorm_fields(units: Sequence[tuple[Any, Any, Any, Any]], mu: Any, sigma: Any, n: int,
                     label: str) -> list[tuple[Any, Any, str]]:
    """The two fields per channel of a layer followed by batch normalisation in eval mode (see
    the module docstring): ``units`` a list of (w, b, gamma, beta) index arrays (b None when the
    layer has no bias: then only the rescaling), ``mu`` and ``sigma`` the fixed statistics.
    Returns (A, c, label) triples for :class:`FieldGroup`."""
    import scipy.sparse as sp

    fields: list[tuple[Any, Any, str]] = []
    for k, (w, b, gamma, beta) in enumerate(units):
        w, gamma, beta = _flat(w), int(np.ravel(gamma)[0]), int(np.ravel(beta)[0])
        rows = list(w) + ([int(np.ravel(b)[0])] if b is not None else []) + [gamma, beta]
        cols = list(w) + ([int(np.ravel(b)[0])] if b is not None else []) + [gamma, gamma]
        vals = [1.0] * (len(rows) - 2) + [-1.0, -mu[k] / sigma[k]]
        A = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
        fields.append((A, None, f"{label} channel {k}: rescaling"))
        if b is not None:
            c = np.zeros(n)
            c[int(np.ravel(b)[0])] = 1.0
            At = sp.csr_matrix(([-1.0 / sigma[k]], ([beta], [gamma])), shape=(n, n))
            fields.append((At, c, f"{label} channel {k}: bias/shift translation"))
    return fields


def mean_shift_fields(weight: Any, bias: Any, n: int, label: str) -> list[tuple[Any, Any, str]]:
    """Fields of a layer z = W a + b whose output stream is read only by layer normalisation:
    b -> b + t 1 (one field) and W -> W + 1 u^T (one per input column). ``weight`` an
    (out, in) index array, ``bias`` an (out,) index array or None."""
    fields = []
    weight = np.asarray(weight, dtype=int)
    if bias is not None:
        c = np.zeros(n)
        c[np.ravel(bias)] = 1.0
        fields.append((None, c, f"{label}: bias + t 1 (layer norm mean shift)"))
    for i in range(weight.shape[1]):
        c = np.zeros(n)
        c[weight[:, i]] = 1.0
        fields.append((None, c, f"{label}: column {i} + t 1 (layer norm mean shift)"))
    return fields


def attention_heads(heads: Sequence[dict[str, Any]], out_bias: Any, n: int,
                    label: str) -> tuple[list[SymmetryGroup], list[tuple[Any, Any, str]]]:
    """The symmetries of multi-head attention (see the module docstring). ``heads`` is a list of
    dicts with (rows, d) index arrays ``q``, ``k``, ``v`` (the head's projection as the matrix
    [W^h | b^h]^T: input features and the bias row as rows, the d head coordinates as columns)
    and ``o`` (W_O^h, (out, d)); ``key_bias``, ``value_bias`` the head's bias positions (d,)
    (None without biases); ``out_bias`` the output projection's bias positions (None without).

    Returns (groups, fields): GL(d) twice per head (:class:`GeneralLinearGroup`) and the
    key-bias and value-bias fields for :class:`FieldGroup`."""
    import scipy.sparse as sp

    groups: list[SymmetryGroup] = []
    fields: list[tuple[Any, Any, str]] = []
    for h, head in enumerate(heads):
        d = head["q"].shape[1]
        groups.append(GeneralLinearGroup(d, right=(head["q"],), contragredient=(head["k"],)))
        groups[-1].name = f"GL({d})"
        groups.append(GeneralLinearGroup(d, right=(head["v"],), contragredient=(head["o"],)))
        groups[-1].name = f"GL({d})"
        if head.get("key_bias") is not None:
            for i, pos in enumerate(np.ravel(head["key_bias"])):
                c = np.zeros(n)
                c[pos] = 1.0
                fields.append((None, c, f"{label} head {h}: key bias {i}"))
        if head.get("value_bias") is not None and out_bias is not None:
            for i, pos in enumerate(np.ravel(head["value_bias"])):
                c = np.zeros(n)
                c[pos] = 1.0
                # d b_O = -W_O^h e_i: the column i of the head's output slice, negated
                A = sp.csr_matrix((-np.ones(len(out_bias)), (np.ravel(out_bias),
                                                              head["o"][:, i])), shape=(n, n))
                fields.append((A, c, f"{label} head {h}: value bias {i} into the output bias"))
    return groups, fields


def unit_permutations(classes: Sequence[tuple[Any, Any]], n: int,
                      adjust: Optional[Callable[..., Any]] = None
                      ) -> Optional[UnitPermutationGroup]:
    """A :class:`UnitPermutationGroup` of the classes (label, (k, s) index arrays) with k > 1."""
    classes = [(label, index) for label, index in classes if len(index) > 1]
    return UnitPermutationGroup(classes, n, adjust) if classes else None


def batchnorm_adjust(gamma: Any, beta: Any, mu: Any,
                     sigma: Any) -> Callable[[Any, Any], Any]:
    """The correction after permuting channels that carry batch-normalisation statistics: the
    channel moved into slot c' (statistics mu', sigma') from slot c keeps computing
    gamma (y - mu) / sigma + beta when gamma -> gamma sigma' / sigma and
    beta -> beta + gamma (mu' - mu) / sigma. ``gamma``, ``beta`` index arrays (k,)."""
    gamma, beta = np.ravel(gamma), np.ravel(beta)
    mu, sigma = np.asarray(mu, float), np.asarray(sigma, float)

    def adjust(theta, perm):
        theta = np.array(theta, dtype=float)
        g = theta[gamma].copy()  # already moved: slot c' holds the parameters of perm[c']
        theta[gamma] = g * sigma / sigma[perm]
        theta[beta] = theta[beta] + g * (mu - mu[perm]) / sigma[perm]
        return theta

    return adjust


def field_group(fields: Sequence[tuple[Any, Any, str]], n: int,
                name: str) -> Optional[FieldGroup]:
    """A :class:`FieldGroup` of the fields, or None for none."""
    return FieldGroup(fields, n, name=name) if fields else None


def layer_norm_hyperplane(gamma: Any, beta: Any, weight: Any, bias: Any, n: int,
                          label: str) -> ShearGroup:
    """The shears of dense layers reading a layer norm's output x = gamma * nrm + beta (see
    :class:`ShearGroup`): x lies on sum_c (x_c - beta_c) / gamma_c = 0, so for every output
    row i, W[i] -> W[i] + t / gamma and b[i] -> b[i] - t sum_c beta_c / gamma_c.
    ``gamma``, ``beta`` (features,) index arrays; ``weight`` (out, features); ``bias`` (out,)."""
    gamma, beta = np.ravel(gamma), np.ravel(beta)
    weight, bias = np.asarray(weight, dtype=int), np.ravel(bias)
    fields = []
    for i in range(weight.shape[0]):
        def f(theta, i=i):
            v = np.zeros(n)
            g = theta[gamma]
            safe = np.where(g != 0.0, g, 1.0)
            inv = np.where(g != 0.0, 1.0 / safe, 0.0)  # a zero scale: no hyperplane there
            v[weight[i]] = inv
            v[bias[i]] = -float(theta[beta] @ inv)
            return v

        fields.append((f, f"{label} row {i}: shear along the layer norm's hyperplane"))
    return ShearGroup(fields, n)
