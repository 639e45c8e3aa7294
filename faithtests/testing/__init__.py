"""Tiny, deterministic model builders for tests of faithtests and of code built on it (no checkpoint,
no download)."""
