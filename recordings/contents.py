"""Rerun's entity path filter expressions, evaluated on entity paths.

``filter_contents`` passes its expressions to rerun-sdk's query engine for the data itself; this
module decides which *columns* a selection has, so that every segment of a dataset is read into
the same schema. The rules are Rerun's: ``/path`` matches that entity, ``/path/**`` it and its
subtree, and a path without its leading ``/`` is the same path (``points/**`` is ``/points/**``;
``**`` alone is the entity named ``**``, not everything); ``-`` excludes, ``+`` (or nothing)
includes; whitespace separates rules, and a call's expressions read as one text (``["-", "a"]`` is
``-a``, as in Rerun); the most specific matching rule wins (the longer path, then an exact path over a
subtree, then the greater path as written, so ``x`` over ``/x``), and of equal rules the last
one. ``/__properties`` is left out unless a rule names it or a path under it. Several
``filter_contents`` calls keep an entity only if every call's rules select it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

PROPERTIES_ENTITY = "/__properties"

Contents = Any
"""What ``filter_contents`` takes: a ``rerun.catalog.ContentFilter`` (anything with
``to_exprs()``), one expression, or a sequence of them."""


def expressions(contents: Contents) -> tuple[str, ...]:
    """The filter expressions of ``contents``, checked. Raises ``ValueError`` for a malformed one."""
    if hasattr(contents, "to_exprs"):  # rerun.catalog.ContentFilter, without importing rerun
        exprs = contents.to_exprs()
    elif isinstance(contents, str):
        exprs = [contents]
    else:
        exprs = list(contents)
    for expr in exprs:
        _rules(expr)
    return tuple(exprs)


def _rules(expr: object) -> list[_Rule]:
    """The rules of an expression: as in Rerun, whitespace separates rules (``"a /b/**"`` is two),
    and a sign standing alone applies to the path after it (``"- /b"`` is one rule). Raises
    ``ValueError`` if ``expr`` is not a string."""
    if not isinstance(expr, str):
        raise ValueError(f"an entity path expression is a string, got {type(expr).__name__}: {expr!r}")
    rules, sign = [], ""
    for token in expr.split():
        if token in ("+", "-") and not sign:
            sign = token
            continue
        rules.append(_Rule.parse(sign + token))
        sign = ""
    if sign:
        rules.append(_Rule.parse(sign))
    return rules


@dataclass(frozen=True)
class _Rule:
    include: bool
    path: tuple[str, ...]
    subtree: bool
    text: str
    """The path as written (without sign or surrounding whitespace)."""

    @property
    def rank(self) -> tuple[int, bool, str]:
        """Of two rules matching an entity, the higher rank wins (the later one if equal): the
        longer path, then an exact path over a subtree, then, as in Rerun, the greater path as
        written (``x`` over ``/x``, ``/x/`` over ``/x``)."""
        return len(self.path), not self.subtree, self.text

    @classmethod
    def parse(cls, expr: str) -> _Rule:
        text = expr.strip()
        include = not text.startswith("-")
        text = text[1:].strip() if text[:1] in "+-" and text else text
        subtree = text == "/**" or text.endswith("/**")
        return cls(include, _parts(text[:-3] if subtree else text), subtree, text)

    def matches(self, entity: tuple[str, ...]) -> bool:
        if self.subtree:
            return entity[:len(self.path)] == self.path
        return entity == self.path


def _parts(path: str) -> tuple[str, ...]:
    return tuple(part for part in path.split("/") if part)


def _selects(rules: Sequence[_Rule], entity: tuple[str, ...]) -> bool:
    best: _Rule | None = None
    for rule in rules:
        if not rule.matches(entity):
            continue
        if best is None or rule.rank >= best.rank:
            best = rule
    if best is None or not best.include:
        return False
    if entity[:1] == _parts(PROPERTIES_ENTITY):
        return best.path[:1] == _parts(PROPERTIES_ENTITY)
    return True


def selects(groups: Sequence[Sequence[str]], entity_path: str) -> bool:
    """Whether every group of expressions (one group per ``filter_contents`` call) selects the entity.

    >>> selects([["/**", "-/text/**"]], "/points")
    True
    >>> selects([["/**"]], "/__properties/episode")
    False
    >>> selects([["__properties/**"]], "/__properties/episode")
    True
    """
    entity = _parts(entity_path)
    return all(_selects(_rules(" ".join(group)), entity) for group in groups)

