#!/usr/bin/env python3
"""Fits the rational functions of kernels/cpu/src/vmath_body.inc.

tanh(x) and erf(x) as x P(x^2) / Q(x^2) on [0, c], least relative error:
P(z) - f(z) Q(z) solved by weighted least squares over a dense grid, the
weights divided by the previous Q (Loeb) and multiplied by the previous
error (Lawson) until the error levels out. Sigmoid's and Phi's quotients
are the same functions scaled: sigmoid(x) = 1/2 + 1/2 tanh(x / 2),
Phi(x) = 1/2 + 1/2 erf(x / sqrt 2). Prints each coefficient list, highest
degree first, as the C++ arrays hold them.

usage: scripts/fit_vmath_quotients.py (numpy)
"""
import math

import numpy as np


def fit(f, slope, degree, c, iterations):
    x = np.unique(np.concatenate([np.linspace(0, c, 4000), c * np.sin(np.linspace(0, np.pi / 2, 4000))]))
    x = x[x > 0]
    y = np.array([f(v) / v for v in x])  # the even function P / Q fits
    u = x * x / (c * c)  # z scaled to [0, 1] for the solve
    y0 = slope  # P(0) / Q(0) = f'(0), with Q(0) = 1
    y = y / y0
    weight, q_prev = np.ones_like(u), np.ones_like(u)
    for _ in range(iterations):
        cols = [u**i for i in range(1, degree + 1)] + [-y * u**j for j in range(1, degree + 1)]
        a = np.stack(cols, 1)
        scale = np.sqrt(weight) / (q_prev * y)
        sol = np.linalg.lstsq(a * scale[:, None], (y - 1) * scale, rcond=None)[0]
        p = 1 + sum(sol[i - 1] * u**i for i in range(1, degree + 1))
        q_prev = 1 + sum(sol[degree + j - 1] * u**j for j in range(1, degree + 1))
        err = np.abs(p / q_prev / y - 1)
        weight = weight * err / err.max()
        weight /= weight.sum()
    s = c * c
    p = [y0 * (1 if i == 0 else sol[i - 1] / s**i) for i in range(degree + 1)]
    q = [1.0] + [sol[degree + j - 1] / s**j for j in range(1, degree + 1)]
    return p, q, err.max()


def show(name, coefficients):
    print(f"{name} = {{" + ", ".join(f"{np.float32(v):.9e}f" for v in reversed(coefficients)) + "}")


def main():
    p, q, err = fit(math.tanh, 1.0, 4, 9.02, 60)
    print(f"tanh on [0, 9.02]: {err / 2**-24:.2f} ulp before rounding to floats")
    show("kTanhP", p)
    show("kTanhQ", q)
    show("kSigmoidP", [v / 4 ** (k + 1) for k, v in enumerate(p)])  # x / 2, times 1 / 2
    show("kSigmoidQ", [v / 4**k for k, v in enumerate(q)])
    p, q, err = fit(math.erf, 2 / math.sqrt(math.pi), 5, 3.92, 120)
    print(f"erf on [0, 3.92]: {err / 2**-24:.2f} ulp before rounding to floats")
    show("kErfP", p)
    show("kErfQ", q)
    show("kPhiP", [v / (2 * math.sqrt(2) * 2**k) for k, v in enumerate(p)])  # x / sqrt 2, times 1 / 2
    show("kPhiQ", [v / 2**k for k, v in enumerate(q)])


if __name__ == "__main__":
    main()
