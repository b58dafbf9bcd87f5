"""The reliability tier: a package, so its modules share the helpers in ``stack.py``."""
