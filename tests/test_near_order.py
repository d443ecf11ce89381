"""near_stratum beyond the snap_max cut-off: a point of widths 2,2,2,1, k = 5 whose first-layer
neuron h1_0 has incoming weights at relative norm 0.109 (above the cut-off 0.1) is critical
because of its approach to the silent-neuron stratum, of order 3k = 15. Second routes: the
ratio at theta in float64 (numpy SVD) against the 50-digit probe, and the order read in
float64 from two points of the ray farther out (t = 1 and 1.48).

Covers: ``paramgeo.critical.classification``, ``paramgeo_plugins.monomial``.
"""

import math

import numpy as np
import pytest

import paramgeo
from paramgeo.critical import classify

W2 = np.array([[1.0, 0.7], [-0.4, 1.1]])
W3 = np.array([[0.9, -1.2]])
STRATUM = "layer 1: 1 in-zero; redundant {h2_0,h2_1}"


def _point(p, eps):
    return p.spec.pack(W1=np.array([[0.8 * eps, 0.6 * eps], [-0.6, 0.8]]), W2=W2, W3=W3)


def _ratio64(p, theta):
    s = np.linalg.svd(p.jacobian(theta), compute_uv=False)
    return s[5] / s[0]  # generic rank 6


@pytest.fixture(scope="module")
def mono5():
    return paramgeo.get("monomial", widths=(2, 2, 2, 1), degree=5)


def test_silent_neuron_beyond_cut_off_certified_by_order(mono5):
    theta = _point(mono5, 0.27)
    rel = 0.27 / np.linalg.norm(theta)
    assert 0.1 < rel < 0.111
    c = classify(mono5, theta)
    assert c.verdict == "critical" and c.causes == ("subnetwork",) and c.near is not None
    assert c.near.stratum == STRATUM and c.near.distance == pytest.approx(rel, rel=1e-9)
    assert c.near.order == 15 == 3 * 5 and abs(c.near.exponent - 15) < 0.05
    assert c.near.predicted_ratio <= c.tol / c.singular_values[0]
    # the probe ends at theta (t = 1); float64 gives the same ratio there
    t1, r1 = c.near.probe[-1]
    assert t1 == 1.0 and r1 == pytest.approx(_ratio64(mono5, theta), rel=1e-3)
    # float64 on the ray farther out (h1_0 scaled by 1.48): the same order
    far = _point(mono5, 0.4)
    q64 = math.log(_ratio64(mono5, far) / _ratio64(mono5, theta)) / math.log(0.4 / 0.27)
    assert abs(q64 - 15) < 0.2
    # with the cut-off the only rule (no snapping at all) the point has no cause
    assert classify(mono5, theta, snap_max=0).causes == ("other",)



def test_out_zero_neuron_linear_order(mono5):
    """h2_0's outgoing weight at 2.7e-7: the rank loss is linear in that distance (order 1),
    certified near `layer 2: 1 out-zero`; float64 at twice the weight doubles the ratio."""
    W1 = np.array([[0.8, 0.6], [-0.6, 0.8]])

    def point(a):
        return mono5.spec.pack(W1=W1, W2=W2, W3=np.array([[a, -1.2]]))

    theta = point(2.7e-7)
    c = classify(mono5, theta)
    assert c.verdict == "critical" and c.causes == ("subnetwork",)
    assert c.near.stratum == "layer 2: 1 out-zero" and c.near.order == 1
    assert c.near.distance == pytest.approx(2.7e-7 / np.linalg.norm(theta), rel=1e-9)
    assert _ratio64(mono5, point(5.4e-7)) / _ratio64(mono5, theta) == pytest.approx(2, rel=1e-3)
