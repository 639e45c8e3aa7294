"""The faithtests pytest plugin (entry point ``faithtests.plugin``): hooks only.

- :mod:`.options`: the ``faithtests`` option group, parsed once into ``FaithOptions`` / ``ModelSpec``;
- :mod:`.hooks`: markers, the ``faith`` recorder fixture, records riding on test reports, the threshold
  and baseline gates, the scorecard and the terminal summary;
- :mod:`.models`: the session-scoped model fixtures;
- :mod:`.distribution`: which xdist worker runs what (``-n N`` means ``--dist loadgroup``; groups);
- :mod:`.shard`: ``--faith-shard K/N``, whole groups per shard (CI matrices, batch schedulers);
- :mod:`.progress`: progress lines of long model stages (also for xdist workers, by the controller);
- each protocol's own fixtures (``faithtests.protocols.FIXTURE_PLUGINS``), so a suite needs no conftest.

Nothing here imports torch at load time.
"""

from faithtests.protocols import FIXTURE_PLUGINS

# distribution before models, which imports it (a plugin module must be registered before it is imported)
pytest_plugins = ["faithtests.plugin.hooks", "faithtests.plugin.distribution", "faithtests.plugin.shard",
                  "faithtests.plugin.models",
                  "faithtests.plugin.progress",
                  *FIXTURE_PLUGINS]
