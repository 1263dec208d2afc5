"""The one base exception of the `retriever` package."""

from vault2okf.protocol import BundleError


class RetrieverError(BundleError):
    """Base of every error the retriever package raises on purpose; the CLI prints its message and exits."""
