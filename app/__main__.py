"""`python -m app` opens the window."""

from app.main import main

if __name__ == "__main__":  # importing app.__main__ (tools walking the package) opens nothing
    raise SystemExit(main())
