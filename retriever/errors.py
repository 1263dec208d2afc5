"""The one base exception of the `retriever` package."""

from vault2okf.protocol import BundleError


class RetrieverError(BundleError):
    """Base of every error the retriever package raises on purpose; the CLI prints its message and exits."""


def check_decodable(text: str, what: str = "the question") -> None:
    """Raise a RetrieverError when ``text`` holds a lone surrogate: bytes that were not UTF-8 (Python decodes
    argv and a C-locale stdin with surrogateescape, so byte 0xFF arrives as U+DCFF) or a JSON "\\ud800" escape.
    Such text cannot be encoded for the embedder, the model or the terminal, so it stops here, named."""
    for at, char in enumerate(text):
        if "\ud800" <= char <= "\udfff":
            code = ord(char)
            shown = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"a lone surrogate U+{code:04X}"
            raise RetrieverError(
                f"{what} is not valid UTF-8 text ({shown} at character {at + 1}): retype it in UTF-8, or set a "
                "UTF-8 locale (LANG=C.UTF-8)"
            )
