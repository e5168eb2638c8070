"""User-facing errors: one line that names the file or argument and the problem.

The CLI prints `bertkit: error: <message>` and exits non-zero; the traceback is shown
only with `--debug`. Library code raises these for anything a user can get wrong.
"""


class BertkitError(Exception):
    """A problem with user input (file, argument, config) — not a bug in bertkit."""


class ConfigError(BertkitError, ValueError):
    """An invalid or unknown configuration field; the message names the field."""
