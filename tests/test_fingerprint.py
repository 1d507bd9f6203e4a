"""The arrival link's partial correlation, checked directly against the textbook formula.

`Fingerprint.arrival_correlation` takes the larger of the plain and the partial correlation, so a
wrong sign in the partial one hides whenever the plain one is larger: only a direct test sees it.
Formula (first-order partial correlation, e.g. Cohen et al., "Applied Multiple Regression", 3.3):
    r_xy.z = (r_xy - r_xz r_yz) / sqrt((1 - r_xz^2) (1 - r_yz^2))
with x the slow-mode share per window, y the arrivals (first tokens per second), z the running
requests held fixed.
"""

import math

import numpy as np
import pytest

from itlkit.diagnosis.fingerprint import partial_correlation

# Eight windows. Running requests climb steadily; `wobble` is orthogonal to that climb
# (sum(wobble) = 0 and sum(wobble x window index) = 0) and `other` is a second, independent
# pattern, so that no correlation below is +-1.
RUNNING = [10.0, 12.0, 14.0, 16.0, 18.0, 20.0, 22.0, 24.0]
WOBBLE = [1.0, -1.0, -1.0, 1.0, 1.0, -1.0, -1.0, 1.0]
OTHER = [1.0, 1.0, -1.0, -1.0, 1.0, 1.0, -1.0, -1.0]


def _pearson(x, y) -> float:
    """Pearson's r from its definition, in plain Python (no numpy, unlike the code under test)."""
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy)


def _textbook_partial(x, y, z) -> float:
    r_xy, r_xz, r_yz = _pearson(x, y), _pearson(x, z), _pearson(y, z)
    return (r_xy - r_xz * r_yz) / math.sqrt((1 - r_xz**2) * (1 - r_yz**2))


def _windows(*, arrivals_wobble: float):
    """Slow share and arrivals both grow with running requests; beyond that shared trend, the
    share moves with `wobble` and the arrivals with `arrivals_wobble x wobble` (+ half `other`)."""
    shares = [0.01 * z + 0.01 * w for z, w in zip(RUNNING, WOBBLE, strict=True)]
    arrivals = [
        0.5 * z + arrivals_wobble * w + 0.5 * o
        for z, w, o in zip(RUNNING, WOBBLE, OTHER, strict=True)
    ]
    return shares, arrivals


def test_partial_correlation_is_negative_when_only_the_common_trend_links_them():
    # Arrivals move against the share once running is held fixed: the plain correlation is
    # positive (both climb with running), the partial one negative.
    shares, arrivals = _windows(arrivals_wobble=-1.0)
    plain = _pearson(shares, arrivals)
    expected = _textbook_partial(shares, arrivals, RUNNING)
    assert plain > 0.5 and expected < -0.5  # the construction does what it claims
    got = partial_correlation(shares, arrivals, RUNNING)
    assert got == pytest.approx(expected, rel=1e-12)
    assert got < 0


def test_partial_correlation_is_positive_when_arrivals_move_with_the_share():
    shares, arrivals = _windows(arrivals_wobble=1.0)
    expected = _textbook_partial(shares, arrivals, RUNNING)
    assert expected > 0.5
    assert partial_correlation(shares, arrivals, RUNNING) == pytest.approx(expected, rel=1e-12)


def test_partial_correlation_of_mirror_images_is_minus_one():
    # share = running + wobble, arrivals = running - wobble: with running held fixed one is the
    # other's negative (wobble is orthogonal to running), so r_xy.z = -1 exactly, while the plain
    # r is (var(running) - var(wobble)) / (var(running) + var(wobble)) > 0.
    shares = [z + w for z, w in zip(RUNNING, WOBBLE, strict=True)]
    arrivals = [z - w for z, w in zip(RUNNING, WOBBLE, strict=True)]
    var_z, var_w = np.var(RUNNING), np.var(WOBBLE)
    assert _pearson(shares, arrivals) == pytest.approx((var_z - var_w) / (var_z + var_w))
    assert partial_correlation(shares, arrivals, RUNNING) == pytest.approx(-1.0, abs=1e-12)


def test_partial_correlation_uses_only_the_complete_windows():
    # A window missing any of the three (NaN) drops out of all three correlations.
    shares, arrivals = _windows(arrivals_wobble=-1.0)
    expected = _textbook_partial(shares, arrivals, RUNNING)
    padded = partial_correlation(
        [*shares, math.nan, 0.3], [*arrivals, 40.0, math.nan], [*RUNNING, 26.0, 28.0]
    )
    assert padded == pytest.approx(expected, rel=1e-12)


def test_partial_correlation_is_nan_when_running_explains_everything():
    # Share a straight function of running: nothing is left once running is held fixed.
    shares = [0.01 * z for z in RUNNING]
    assert math.isnan(partial_correlation(shares, OTHER, RUNNING))
