"""Training and evaluation of the reference models (``faithtests train-reference``), apart from the
runtime: nothing under ``faithtests/`` outside this package and ``faithtests.cli`` imports it."""
