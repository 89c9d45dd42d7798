"""tests/python: comparing strata's values with an expected array where IEEE's special values are the point
(NaN, infinities, signed zeros): shared by the division tests and the torch-agreement tests."""
import math


def same(test, got, want, rtol, what, atol=0.0):
    """Elementwise: NaN where want has NaN, infinities and the sign of zeros exact, the rest within
    rtol * |want| + atol (atol for values whose error is absolute, not relative: a cancellation)."""
    test.assertEqual(got.shape, want.shape, what)
    for g, w in zip(got.ravel().tolist(), want.ravel().tolist()):
        if math.isnan(w):
            test.assertTrue(math.isnan(g), f"{what}: {g} where NaN is expected")
        elif w == 0 or math.isinf(w):
            test.assertEqual(g, w, what)
            test.assertEqual(math.copysign(1, g), math.copysign(1, w), f"{what}: the sign of {w}")
        else:
            test.assertLessEqual(abs(g - w), rtol * abs(w) + max(atol, 1e-300), f"{what}: {g} vs {w}")
