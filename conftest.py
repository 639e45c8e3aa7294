"""Root conftest: activates the faithtests plugin for in-repo runs (an installed package activates it
through its ``pytest11`` entry point, registered under the same module name, so it is never loaded twice)."""

pytest_plugins = ["faithtests.plugin"]
