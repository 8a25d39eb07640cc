"""tinytorch.testing's helpers for notebooks: assert_passes (a check that explains its own failure)
and best_time (timings without the warm-up)."""
import time

import pytest

from tinytorch import autograd as ag
from tinytorch.testing import assert_passes, best_time


def test_assert_passes_shows_the_label_the_gradcheck_detail_and_the_hint():
    """A wrong gradient in a visible `assert_passes(gradcheck, ...)` check names what was checked,
    where autograd and central differences disagree (input, element, both numbers) and the hint."""
    class WrongLast(ag.Function):  # x * 3 whose backward drops the last element's gradient
        @staticmethod
        def forward(ctx, x):
            return ag.BaseTensor.__mul__(x, 3.0)

        @staticmethod
        def backward(ctx, g):
            out = g * 3.0
            out[-1] = 0.0
            return out

    x = ag.tensor([0.5, 1.5, 2.0], dtype="float64", requires_grad=True)
    with pytest.raises(AssertionError) as error:
        assert_passes(ag.gradcheck, WrongLast.apply, (x,), what="gradcheck of WrongLast", hint="look at the last element")
    message = str(error.value)
    assert message.startswith("gradcheck of WrongLast: gradcheck: input 0, element (2,)")
    assert "autograd gives 0, central differences give 1.92127" in message  # d/dx of sum(3 x * v), v seeded
    assert message.endswith("hint: look at the last element")
    assert assert_passes(ag.gradcheck, lambda t: t * 3.0, (x,), what="gradcheck of x * 3") is None
    with pytest.raises(AssertionError, match="^a check that returns 0: expected a true result, but it returned a false one$"):
        assert_passes(lambda: 0, what="a check that returns 0")


def test_best_time_leaves_out_the_warm_up_calls(monkeypatch):
    """On a clock that each call moves by a given amount: the two warm-up calls (the slowest here)
    are made but not timed, and the result is the fastest timed call."""
    costs, now, calls = iter([9.0, 7.0, 3.0, 0.5, 2.0, 1.0, 4.0]), [0.0], []

    def fn():
        calls.append(1)
        now[0] += next(costs)
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    assert best_time(fn) == 0.5
    assert len(calls) == 7  # 2 warm-up + 5 timed
    costs, calls[:] = iter([9.0, 7.0]), []
    assert best_time(fn, repeat=1, warmup=1) == 7.0 and len(calls) == 2
