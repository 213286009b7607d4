"""`python -m serve_apps.cli ...` is `iriis ...` (the relay tool server starts it this way)."""

from serve_apps.cli import main

raise SystemExit(main())
