"""The one base exception of the `retriever` package."""


class RetrieverError(Exception):
    """Base of every error the retriever package raises on purpose; the CLI prints its message and exits."""
