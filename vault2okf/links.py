"""Read a bundle's link-health report back (the ``links`` command)."""

from __future__ import annotations

import json
from pathlib import Path

from vault2okf.errors import Vault2OkfError

REPORT = "link-health"


def read_link_health(bundle: Path, *, as_json: bool = False) -> str:
    """The report's Markdown, or its JSON re-indented; an error that says what to run when it is missing or bad."""
    path = bundle / f"{REPORT}.{'json' if as_json else 'md'}"
    if not path.is_file():
        raise Vault2OkfError(_missing(bundle))
    try:
        text = path.read_text("utf-8")
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n" if as_json else text
    except (UnicodeDecodeError, ValueError) as e:
        raise Vault2OkfError(f"{path} is damaged ({e}): convert the vault again to rewrite it") from e


def _missing(bundle: Path) -> str:
    if not bundle.is_dir():
        return f"{bundle} does not exist: give a bundle written by `vault2okf convert VAULT -o BUNDLE`"
    if any(bundle.glob("*.md")) or (bundle / ".obsidian").is_dir():
        return (
            f"{bundle} looks like a vault, not a bundle: convert it with `vault2okf convert {bundle} -o BUNDLE`, "
            "then run `vault2okf links BUNDLE`"
        )
    return f"no link-health report in {bundle}: run `vault2okf convert VAULT -o {bundle}` first"
