"""What the subcommands share: the exit statuses of ``autotune``."""

from __future__ import annotations

EXIT_OK, EXIT_WRONG, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
