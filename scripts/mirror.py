#!/usr/bin/env python3
"""Serve a folder laid out as <owner>/<repo>/<tag>/<asset> as a GitHub-compatible releases API.

scripts/mirror.py /srv/mirror --host 127.0.0.1 --port 8765
BACKENDMGR_GITHUB_API=http://127.0.0.1:8765 backendmgr install llama-server
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backendmgr.mirror import main

raise SystemExit(main())
