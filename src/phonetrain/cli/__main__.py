"""``python -m phonetrain.cli``: the ``phonetrain`` console script."""

from phonetrain.cli import main

main()
