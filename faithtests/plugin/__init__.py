"""The faithtests pytest plugin (entry point ``faithtests.plugin``): hooks only.

- :mod:`.options`: the ``faithtests`` option group, parsed once into ``FaithOptions`` / ``ModelSpec``;
- :mod:`.hooks`: markers, the ``faith`` recorder fixture, records riding on test reports, the threshold
  and baseline gates, the scorecard and the terminal summary;
- :mod:`.models`: the session-scoped model fixtures;
- each protocol's own fixtures (``faithtests.protocols.FIXTURE_PLUGINS``), so a suite needs no conftest.

Nothing here imports torch at load time.
"""

from faithtests.protocols import FIXTURE_PLUGINS

pytest_plugins = ["faithtests.plugin.hooks", "faithtests.plugin.models", *FIXTURE_PLUGINS]
