"""Argument parsing and rendering only; every decision lives in :mod:`backendmgr.manager`."""
