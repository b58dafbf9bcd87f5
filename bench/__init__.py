"""Benchmarks that print numbers (``python -m bench``); nothing here asserts."""
