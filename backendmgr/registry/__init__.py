"""Registry rules: kinds and classes, rows and ★, adoption, legacy fallbacks, resolution.

Pure functions over :mod:`backendmgr.config.models`; nothing here touches a disk.
"""
