"""The unit tier: a package, so its modules import the helpers in conftest.py as ``.conftest``
without clashing with the integration tier's conftest."""
