# -*- coding: utf-8 -*-
# Copyright: backendmgr contributors
# MIT License (see LICENSE or https://opensource.org/licenses/MIT)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The options every backendmgr module takes: which backendmgr, which home and config."""

    DOCUMENTATION = r"""
options:
  executable:
    description:
      - The backendmgr command on the managed host, a name looked up on C(PATH) or a path.
    type: str
    default: backendmgr
  home:
    description:
      - backendmgr's data home on the managed host (builds, caches, locks), passed as C(--home).
      - Default is backendmgr's own (C(BACKENDMGR_HOME), else the user's data folder).
    type: path
  config:
    description:
      - backendmgr's config file on the managed host, passed as C(--config).
      - Default is backendmgr's own (C(BACKENDMGR_CONFIG), else the user's config folder).
    type: path
  github_api:
    description:
      - The releases API base URL builds are downloaded from, set as C(BACKENDMGR_GITHUB_API).
      - For air-gapped sites, the URL of a mirror serving a folder filled by C(backendmgr fetch)
        (C(scripts/mirror.py) in the backendmgr repository).
    type: str
notes:
  - The module runs C(backendmgr --json ...) on the managed host and reads its JSON answer; a
    failure is C(failed) with backendmgr's one-line error as C(msg).
requirements:
  - backendmgr installed on the managed host.
"""
