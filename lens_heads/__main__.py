"""``python -m lens_heads ...`` runs the ``lens-heads`` command."""

from lens_heads.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
