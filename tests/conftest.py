"""Test-suite configuration: ``pytester`` drives the plugin tests (tests/test_plugin*.py)."""

pytest_plugins = ["pytester"]
