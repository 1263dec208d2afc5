"""``python -m vault2okf``: the console command."""

from vault2okf.cli import app

app(prog_name="vault2okf")
