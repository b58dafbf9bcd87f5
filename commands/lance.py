"""Lance tables registered as read-only table entries (``CatalogClient.register_table``), opened
for every client that reads them."""

from __future__ import annotations

from typing import Any

from events import import_extra
from recordings import NotFoundError, local_path


def lance_table(url: str) -> Any:
    """The Lance dataset at a ``file://`` URL. Raises ``NotFoundError`` if there is none,
    ``ValueError`` if what is there is not a Lance table, ``MissingExtraError`` without
    ``strata[lance]``."""
    lance = import_extra("lance", "lance", "a Lance table")  # heavy: imported on first use
    path = local_path(url)
    if not path.exists():
        raise NotFoundError(f"no Lance table at {url} ({path})")
    try:
        return lance.dataset(str(path))
    except (ValueError, OSError) as exc:
        raise ValueError(f"{url} is not a Lance table: {exc}") from None
