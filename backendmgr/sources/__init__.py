"""Where versions come from: GitHub releases (with an on-disk cache) and Python package indexes."""
