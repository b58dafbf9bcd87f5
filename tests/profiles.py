"""How hard the property tests (hypothesis) try, chosen by ``STRATA_HYPOTHESIS_PROFILE``.

``ci`` (the default, and what ``make test`` runs) tries each test's full number of examples;
``dev`` (what ``make check`` runs while working) a quarter of it. In both, no example has a
deadline: a busy machine is slow, not wrong. ``tests/conftest.py`` loads the profile before any
test module is imported, so a test's ``@settings(max_examples=examples(60))`` sees it.
"""

from __future__ import annotations

import os

from hypothesis import settings

PROFILES = ("ci", "dev")
PROFILE = os.environ.get("STRATA_HYPOTHESIS_PROFILE", "ci")
DEV_SHARE = 4
"""Under ``dev``, a test tries 1/DEV_SHARE of its full number of examples ..."""
DEV_FLOOR = 5
"""... and never fewer than this."""


def load() -> None:
    """Register both profiles and load the one ``STRATA_HYPOTHESIS_PROFILE`` names; raises
    ``ValueError`` for a name that is neither."""
    if PROFILE not in PROFILES:
        raise ValueError(f"STRATA_HYPOTHESIS_PROFILE={PROFILE!r}: use one of {', '.join(PROFILES)}")
    settings.register_profile("ci", deadline=None, print_blob=True)
    settings.register_profile("dev", deadline=None, print_blob=True, max_examples=100 // DEV_SHARE)
    settings.load_profile(PROFILE)


def examples(full: int) -> int:
    """The number of examples a property test tries: ``full`` under ``ci``, a share of it under
    ``dev``.

    >>> examples(60)  # doctest: +SKIP
    15
    """
    return full if PROFILE == "ci" else min(full, max(DEV_FLOOR, full // DEV_SHARE))
