"""The producer's one base exception: a message that says what went wrong, where, and how to fix it."""

from __future__ import annotations

from vault2okf.protocol import BundleError


class Vault2OkfError(BundleError):
    pass
