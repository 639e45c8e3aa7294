"""The faithtests pytest plugin (entry point ``faithtests.plugin``): hooks only.

- :mod:`.option_table`: every option, declared once (the protocols' come from their manifests), read
  with :func:`faithtests.config.setting`; :mod:`.options` reads them once into ``FaithOptions``;
- :mod:`.pytest_hooks`: markers, the ``faith`` recorder fixture, records riding on test reports, the
  threshold and baseline gates (the controller), the scorecard and the terminal summary;
- :mod:`.model_fixtures`: the session-scoped model fixtures;
- :mod:`.distribution`: which xdist worker runs what (``-n N`` means ``--dist loadgroup``; groups);
- :mod:`.shard`: ``--faith-shard K/N``, whole groups per shard (CI matrices, batch schedulers);
- :mod:`.api_cost`: what the served models are asked, per suite; ``--faith-api-estimate`` counts it unsent;
- :mod:`.progress_report`: progress lines of long model stages (also for xdist workers, by the controller);
- each protocol's fixtures module, named by its manifest (:func:`faithtests.protocols.manifests`), so a
  suite needs no conftest.

Nothing here imports torch at load time.
"""

from faithtests.protocols import fixture_plugins

# a plugin module is registered before any other one imports it (pytest rewrites the asserts of a module
# only when it imports it first): distribution, shard and api_cost before pytest_hooks (its controller
# imports shard, it imports api_cost), distribution before model_fixtures
pytest_plugins = ["faithtests.plugin.distribution", "faithtests.plugin.shard", "faithtests.plugin.api_cost",
                  "faithtests.plugin.pytest_hooks", "faithtests.plugin.model_fixtures",
                  "faithtests.plugin.progress_report", *fixture_plugins()]
