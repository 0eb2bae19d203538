#!/usr/bin/env python3
"""How precisely can a descent's ends be placed from a distance sensor's readings?

The Cramér-Rao bound: no unbiased estimator of a descent's start from readings with white
noise of standard deviation sigma can scatter less than the square root of the inverse
Fisher information, J^T J / sigma^2, J the model's derivatives by its parameters. It is
computed here for three models of a descent from a rest, each fitted to the same readings:

- local: what docs/detection.md "Phases and tempo" fits. A rest, then a parabola, over the
  readings within 1.3 half-windows of the edge, a half-window a quarter of the descent's
  moving run (the velocity beyond 0.05 m/s). Unknowns: the rest's level, the acceleration,
  the edge.
- quintic: the whole descent between its two rests as any quintic in time that leaves and
  reaches them at rest (no other assumption on its shape). Unknowns: the top's level, the
  drop, two shape terms, both edges.
- cosine: the whole descent with the simulator's own shape known beforehand, a half cosine.
  Only an estimator fitted to the simulator could assume it; it is here as the floor.

The bar is lowered as the simulator lowers it (a half cosine), read at `--rate` Hz with
`--noise-mm` of noise. Prints each model's standard deviation of one edge and of the
descent's duration (two edges), in ms.

  python3 scripts/phase-bound.py [--rate 50] [--noise-mm 2]
"""

import argparse

import numpy as np


def half_cosine(t, seconds, drop_m):
    """The simulator's lowering: height below the top at time t (0 at the start)."""
    u = np.clip(t / seconds, 0.0, 1.0)
    return -drop_m * (1 - np.cos(np.pi * u)) / 2


def bound(model, params, times, noise_m, index):
    """The least covariance of the parameters `index`: the inverse of the Fisher information."""
    jacobian = np.zeros((len(times), len(params)))
    for k in range(len(params)):
        step = np.zeros(len(params))
        step[k] = 1e-6
        jacobian[:, k] = (model(times, params + step) - model(times, params - step)) / 2e-6
    covariance = np.linalg.inv(jacobian.T @ jacobian / noise_m**2)
    return covariance[np.ix_(index, index)]


def moving_run(seconds, drop_m, threshold_mps=0.05):
    """How long the half cosine moves faster than the threshold."""
    peak = drop_m * np.pi / (2 * seconds)
    if peak <= threshold_mps:
        return 0.0
    u = np.arcsin(threshold_mps / peak) / np.pi
    return (1 - 2 * u) * seconds


def local_bound(seconds, drop_m, rate, noise_m):
    half = min(1.2, max(0.06, 0.25 * moving_run(seconds, drop_m)))
    times = np.arange(-1.3 * half, 1.3 * half, 1 / rate) + 0.37 / rate
    acceleration = drop_m * np.pi**2 / (2 * seconds**2)

    def model(t, p):
        level, curvature, edge = p
        tau = np.clip(t - edge, 0, None)
        return level - curvature / 2 * tau**2

    variance = bound(model, np.array([0.0, acceleration, 0.0]), times, noise_m, [2])
    return np.sqrt(variance[0, 0]), np.sqrt(2 * variance[0, 0])


def whole_bound(seconds, drop_m, rate, noise_m, shape):
    """Both edges of the whole descent, rests of 0.5 s on either side."""
    times = np.arange(-0.5, seconds + 0.5, 1 / rate) + 0.37 / rate

    def progress(t, start, end):
        return np.clip((t - start) / (end - start), 0.0, 1.0)

    if shape == "quintic":

        def columns(u):
            """Every quintic leaving 0 and reaching 1 at rest: a level, a drop and two shape terms."""
            return np.stack([np.ones_like(u), 3 * u**2 - 2 * u**3, u**2 * (1 - u) ** 2, u**3 * (1 - u) ** 2], 1)

        # The quintic nearest the half cosine is the one whose edges are bounded.
        fitted = np.linalg.lstsq(columns(progress(times, 0.0, seconds)), half_cosine(times, seconds, drop_m), rcond=None)[0]

        def model(t, p):
            return columns(progress(t, p[4], p[5])) @ p[:4]

        params = np.array(list(fitted) + [0.0, seconds])
        edges = [4, 5]
    else:

        def model(t, p):
            top, drop, start, end = p
            return top - drop * (1 - np.cos(np.pi * progress(t, start, end))) / 2

        params = np.array([0.0, drop_m, 0.0, seconds])
        edges = [2, 3]
    covariance = bound(model, params, times, noise_m, edges)
    duration = covariance[0, 0] + covariance[1, 1] - 2 * covariance[0, 1]
    return np.sqrt(covariance[0, 0]), np.sqrt(duration)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=50.0, help="readings per second (50)")
    parser.add_argument("--noise-mm", type=float, default=2.0, help="the sensor's noise, mm (2, the laser's)")
    args = parser.parse_args()
    noise = args.noise_mm / 1000
    print(f"{args.rate:g} Hz, {args.noise_mm:g} mm noise; one edge / the duration, standard deviations in ms")
    print(f"{'descent':<20} {'local':>14} {'quintic':>14} {'cosine known':>14}")
    for seconds, drop in [(1.6, 0.6), (3.0, 0.6), (3.0, 0.42), (5.0, 0.42)]:
        cells = [local_bound(seconds, drop, args.rate, noise)]
        cells += [whole_bound(seconds, drop, args.rate, noise, shape) for shape in ("quintic", "cosine")]
        text = " ".join(f"{1000 * edge:6.1f} / {1000 * duration:5.1f}" for edge, duration in cells)
        print(f"{seconds:.1f} s, {1000 * drop:.0f} mm     {text}")


if __name__ == "__main__":
    main()
