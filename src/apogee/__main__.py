"""``python -m apogee`` runs the ``apogee`` command."""

from apogee.cli.main import main

main()
