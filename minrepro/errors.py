"""The one error type the CLI turns into a one-line message (no traceback) and exit status 2."""


class MinreproError(Exception):
    """Bad input or an environment problem the user can fix: printed as one line."""
