"""Installing builds: download, verify, extract, the build store, archive and venv jobs."""
