"""Paths, the settings models and the round-trip config store."""
