"""The reliability tier. Its helpers are shared with the other tiers: ``tests/stack.py`` and
``tests/stores.py``."""
