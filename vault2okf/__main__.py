"""``python -m vault2okf``: the console command."""

from vault2okf.cli import main

main()
