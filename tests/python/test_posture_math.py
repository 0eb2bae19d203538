"""The posture maths (mean, covariance, determinant, inverse, eigenvalues,
densities) checked against NumPy/SciPy, on random and ill-conditioned data,
through `posture-evaluator --compute`."""

import json
import subprocess
from pathlib import Path

import mpmath
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from test_wire import binary

RTOL = 1e-9  # relative; matrices normwise (see check)


def fit(tmp_path: Path, acc: np.ndarray, mag: np.ndarray, acc_points: np.ndarray, mag_points: np.ndarray) -> dict:
    path = tmp_path / "input.json"
    path.write_text(json.dumps({"acc": acc.tolist(), "mag": mag.tolist(),
                                "accPoints": acc_points.tolist(), "magPoints": mag_points.tolist()}))
    result = subprocess.run([binary("posture-evaluator"), "--compute", str(path)], capture_output=True, text=True,
                            timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def exact_covariance(data: np.ndarray):
    """Mean and covariance of the same double-precision readings, in 50-digit arithmetic."""
    mpmath.mp.dps = 50
    rows = [[mpmath.mpf(float(x)) for x in row] for row in data]
    n = len(rows)
    mean = [sum(row[i] for row in rows) / n for i in range(3)]
    cov = mpmath.matrix(3, 3)
    for row in rows:
        d = [row[i] - mean[i] for i in range(3)]
        for j in range(3):
            for k in range(3):
                cov[j, k] += d[j] * d[k]
    return mean, cov / (n - 1)


def exact_densities(data: np.ndarray, points: np.ndarray) -> list[float]:
    """Densities from the same double-precision readings, in 50-digit arithmetic."""
    mean, cov = exact_covariance(data)
    det, inv = mpmath.det(cov), cov ** -1
    result = []
    for point in points:
        d = mpmath.matrix([mpmath.mpf(float(point[i])) - mean[i] for i in range(3)])
        q = (d.T * inv * d)[0]
        result.append(float((2 * mpmath.pi) ** -1.5 * det ** -0.5 * mpmath.exp(-q / 2)))
    return result


def check(calibration: dict, data: np.ndarray, densities: list[float], points: np.ndarray,
          ill_conditioned: bool = False) -> None:
    assert calibration["fromData"], calibration.get("reason")
    mean = data.mean(axis=0)
    cov = np.cov(data, rowvar=False, ddof=1)
    np.testing.assert_allclose(calibration["mean"], mean, rtol=RTOL, atol=1e-12 * np.abs(mean).max())
    np.testing.assert_allclose(calibration["covariance"], cov, rtol=RTOL, atol=1e-12 * np.abs(cov).max())
    if not ill_conditioned:
        np.testing.assert_allclose(calibration["determinant"], np.linalg.det(cov), rtol=RTOL)
        inverse = np.linalg.inv(cov)
        # Normwise: small entries of an inverse carry error relative to the largest.
        np.testing.assert_allclose(calibration["inverse"], inverse, rtol=RTOL, atol=RTOL * np.abs(inverse).max())
    else:
        # An ill-conditioned matrix's determinant and inverse carry relative
        # error of the order of cond x eps from the covariance's last bits
        # alone, in any implementation: NumPy 2.4 and the NumPy this test was
        # first run with differ by 5e-8 here (that one agreed with us to 1e-9
        # by luck). So both are checked against 50-digit arithmetic, within
        # 10 x cond x eps (the inverse normwise).
        eigen = np.linalg.eigvalsh(cov)
        bound = max(RTOL, 10 * eigen.max() / eigen.min() * np.finfo(float).eps)
        exact = exact_covariance(data)[1]
        determinant = float(mpmath.det(exact))
        inverse = np.array((exact ** -1).tolist(), dtype=float)
        assert abs(calibration["determinant"] - determinant) / determinant <= bound, (calibration["determinant"], determinant, bound)
        np.testing.assert_allclose(calibration["inverse"], inverse, rtol=bound, atol=bound * np.abs(inverse).max())
    eigen = np.sort(np.linalg.eigvalsh(cov))[::-1]
    # Eigenvalues normwise too: the smallest of an ill-conditioned matrix is only
    # defined to eps x the largest, in any implementation.
    np.testing.assert_allclose(calibration["eigenvalues"], eigen, rtol=RTOL, atol=RTOL * eigen.max())
    np.testing.assert_allclose(calibration["sigma"], np.sqrt(eigen), rtol=RTOL, atol=RTOL * np.sqrt(eigen.max()))
    model = multivariate_normal(mean=mean, cov=cov)
    if not ill_conditioned:
        np.testing.assert_allclose(densities, model.pdf(points), rtol=RTOL)
    else:
        # With eigenvalues 1e8 apart, the density is sensitive to the last bits
        # of the covariance (SciPy versions differ from the exact value by
        # 2e-9 to 3e-8), so it is checked against 50-digit arithmetic, within
        # the same 10 x cond x eps as the determinant.
        exact = np.array(exact_densities(data, points))
        ours = np.abs(np.array(densities) - exact) / exact
        assert np.all(ours <= bound), (ours, bound)
    # The threshold is density(mean + 2 sigma) (SensorCalibration.sigmaFactor); like every density it is guarded:
    # an exponent below -100 gives 1e-50 (the seed's rule) instead of underflowing.
    x = mean + 2 * np.sqrt(eigen)
    exponent = model.logpdf(x) - np.log((2 * np.pi) ** -1.5 * np.linalg.det(cov) ** -0.5)
    expected = model.pdf(x) if exponent >= -100 else 1e-50
    np.testing.assert_allclose(calibration["threshold"], expected, rtol=RTOL if not ill_conditioned else 1e-7)


@pytest.mark.parametrize("seed", range(5))
def test_random_data_matches_numpy(tmp_path: Path, seed: int):
    rng = np.random.default_rng(seed)
    # An accelerometer near gravity and a magnetometer in microtesla, with correlated noise.
    acc = rng.multivariate_normal([0.1, -0.2, 9.8], [[0.04, 0.01, 0.0], [0.01, 0.09, 0.02], [0.0, 0.02, 0.05]], size=200)
    mag = rng.multivariate_normal([30, -12, -40], [[4, 1, 0.5], [1, 9, -2], [0.5, -2, 6]], size=200)
    acc_points, mag_points = acc[:5] + 0.1, mag[:5] - 0.5
    result = fit(tmp_path, acc, mag, acc_points, mag_points)
    check(result["acc"], acc, result["accDensities"], acc_points)
    check(result["mag"], mag, result["magDensities"], mag_points)


def test_ill_conditioned_data_matches_numpy(tmp_path: Path):
    rng = np.random.default_rng(42)
    # Nearly one-dimensional: eigenvalues from about 1e2 down to 1e-6.
    t = rng.normal(size=(300, 1))
    base = np.hstack([t * 10, t * 7 + 1e-3 * rng.normal(size=(300, 1)), t * 3 + 1e-2 * rng.normal(size=(300, 1))])
    acc = base + np.array([0.0, 0.0, 9.8])
    mag = base * 3 + np.array([25.0, 5.0, -40.0])
    acc_points = np.vstack([acc.mean(axis=0) + [1e-4, 2e-4, -1e-4], acc.mean(axis=0) + [1e-1, 7e-2, 3e-2]])
    mag_points = np.vstack([mag.mean(axis=0) + [1e-3, -1e-3, 2e-3], mag.mean(axis=0) + [0.3, 0.21, 0.09]])
    result = fit(tmp_path, acc, mag, acc_points, mag_points)
    for key, data in (("acc", acc), ("mag", mag)):
        eigen = np.linalg.eigvalsh(np.cov(data, rowvar=False))
        assert eigen.max() / eigen.min() > 1e6, "the fixture must be ill-conditioned"
    check(result["acc"], acc, result["accDensities"], acc_points, ill_conditioned=True)
    check(result["mag"], mag, result["magDensities"], mag_points, ill_conditioned=True)
