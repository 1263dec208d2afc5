"""``vault2okf links BUNDLE``: the link-health report, its fixes, and what changed since an older one."""

from __future__ import annotations

from pathlib import Path

import typer

from vault2okf.cli.options import BUNDLE
from vault2okf.cli.render import echo
from vault2okf.errors import Vault2OkfError
from vault2okf.links import diff_reports, load_report, mentions_list, open_html, overrides_toml, read_link_health


def links_cmd(
    bundle: Path = BUNDLE,
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    open_: bool = typer.Option(False, "--open", help="Open link-health.html in the browser; print its path."),
    overrides: bool = typer.Option(
        False, "--overrides", help="Print a [links.overrides] table of the suggested fixes (> fixes.toml)."
    ),
    diff: Path | None = typer.Option(None, "--diff", help="Say what changed since OLD link-health.json."),
    mentions: bool = typer.Option(
        False, "--mentions", help="List the notes' unlinked mentions with the wikilink to write for each."
    ),
) -> None:
    """Show the link-health report of BUNDLE; or open it, write the fixes, list unlinked mentions, or compare."""
    if sum((as_json, open_, overrides, diff is not None, mentions)) > 1:
        raise Vault2OkfError("give one of --json, --open, --overrides, --diff, --mentions")
    if open_:
        echo(str(open_html(bundle)))
    elif overrides:
        echo(overrides_toml(load_report(bundle)), nl=False)
    elif mentions:
        echo(mentions_list(load_report(bundle)), nl=False)
    elif diff is not None:
        old = load_report(diff)  # checked before the bundle, so a bad OLD is named first
        echo(diff_reports(old, load_report(bundle)), nl=False)
    else:
        echo(read_link_health(bundle, as_json=as_json), nl=False)
