"""Helpers that the notebooks' tests share (hand-written: the only module not exported by nbdev)."""


def expect_error(error_type, fn, *args, match=None, **kwargs):
    """Check that `fn(*args, **kwargs)` raises `error_type` (whose message contains `match`).

    Returns the error. A NotImplementedError (an unfinished exercise) passes through unchanged.
    """
    try:
        fn(*args, **kwargs)
    except error_type as e:
        if match is not None and match.lower() not in str(e).lower():
            raise AssertionError(f"error message {str(e)!r} should mention {match!r}") from e
        return e
    except NotImplementedError:
        raise
    except Exception as e:
        raise AssertionError(f"expected {error_type.__name__}, got {type(e).__name__}: {e}") from e
    raise AssertionError(f"expected {error_type.__name__}, but nothing was raised")
