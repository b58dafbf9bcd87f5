"""The root of every error strata raises on purpose, in the package every other one imports."""


class StrataError(Exception):
    """Root of strata's own errors (``sdk.errors`` lists them)."""
