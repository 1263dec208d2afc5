"""The one exception of the eval harness."""


class EvalError(Exception):
    """A golden set, run or report input is wrong; the message says what, where, and how to fix it."""
