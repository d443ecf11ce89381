"""`python cli.py ...` runs the paramgeo command line (a thin shim over paramgeo.cli)."""

from paramgeo.cli import main

if __name__ == "__main__":
    main(prog_name="paramgeo")
