#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: backendmgr contributors
# MIT License (see LICENSE or https://opensource.org/licenses/MIT)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: backendmgr_sync
short_description: Make a host's backendmgr builds match a lock file
description:
  - Runs C(backendmgr sync) on the managed host, which installs the builds the lock lists and
    this host lacks (verified against the lock's SHA-256), reinstalls builds that differ from
    the lock, activates the locked builds and, with O(prune), removes builds the lock does not
    list.
  - C(changed) is true only when something was installed, reinstalled, activated or removed
    (and the llama-swap config regenerated with it), or when O(content) rewrote the lock file.
  - In check mode the module runs C(backendmgr sync --dry-run); nothing changes and C(changed)
    says whether the real run would change something.
  - In diff mode the module shows the host's builds before and after, one per line, with the
    activated ones marked.
version_added: "0.1.0"
author:
  - backendmgr contributors (!UNKNOWN)
extends_documentation_fragment:
  - backendmgr.fleet.backendmgr
attributes:
  check_mode:
    description: In check mode nothing changes and C(changed) is what C(sync --dry-run) reports.
    support: full
  diff_mode:
    description: Shows the host's builds before and after, the activated ones marked.
    support: full
options:
  lock:
    description:
      - The lock file on the managed host.
      - Default is backendmgr's own, C(backendmgr.lock) beside the config file.
      - Required with O(content).
    type: path
  content:
    description:
      - The lock's text, usually read on the controller with
        C(lookup('ansible.builtin.file', 'backendmgr.lock', rstrip=false)).
      - Written to O(lock) atomically when the file there differs, before syncing, and put
        back as it was when the sync fails; in check mode a private temporary copy is synced
        with C(--dry-run) instead and O(lock) is left alone.
    type: str
  locked:
    description:
      - Fail, changing nothing, when this host has builds the lock does not record or that
        differ from it (C(backendmgr sync --locked)).
    type: bool
    default: false
  prune:
    description:
      - Remove builds the lock does not list; builds a model is pinned to are kept unless
        O(force) is set.
    type: bool
    default: false
  force:
    description:
      - With O(prune), remove pinned builds too (their models fall back).
    type: bool
    default: false
  save_previous:
    description:
      - Before changing anything, write this host's current builds as a lock to this path
        (C(backendmgr lock --output)), so that a later sync with O(prune) can return to them.
      - Written on every real run (the current builds, whatever the lock says); not in check
        mode. Writing it does not count as a change.
    type: path
"""

EXAMPLES = r"""
- name: Make the host match the lock kept in the playbook's folder
  backendmgr.fleet.backendmgr_sync:
    lock: /etc/backendmgr/backendmgr.lock
    content: "{{ lookup('ansible.builtin.file', 'backendmgr.lock', rstrip=false) }}"
    save_previous: /etc/backendmgr/backendmgr.lock.previous

- name: Install from an air-gapped mirror, refusing a host that drifted from the lock
  backendmgr.fleet.backendmgr_sync:
    lock: /etc/backendmgr/backendmgr.lock
    locked: true
    github_api: http://mirror.internal:8765

- name: Go back to the builds the host had before
  backendmgr.fleet.backendmgr_sync:
    lock: /etc/backendmgr/backendmgr.lock.previous
    prune: true
"""

RETURN = r"""
lock:
  description: The lock file synced with.
  returned: always
  type: str
  sample: /etc/backendmgr/backendmgr.lock
install:
  description: Builds installed (in check mode, that would be installed).
  returned: success
  type: list
  elements: str
  sample: [llama-server@b100-vulkan]
reinstall:
  description: Builds reinstalled because they differed from the lock (or would be).
  returned: success
  type: list
  elements: str
  sample: []
activate:
  description: Builds activated (or that would be).
  returned: success
  type: list
  elements: str
  sample: [llama-server@b100-vulkan]
remove:
  description: Builds removed by O(prune) (or that would be).
  returned: success
  type: list
  elements: str
  sample: []
kept:
  description: Builds O(prune) kept because a model is pinned to them.
  returned: success
  type: list
  elements: str
  sample: []
builds:
  description: The host's builds afterwards (in check mode, as backendmgr's dry run plans them), id to activated.
  returned: always
  type: dict
  sample: {"llama-server@b100-vulkan": true}
added:
  description: Build ids that were not installed before.
  returned: always
  type: list
  elements: str
removed:
  description: Build ids that are no longer installed.
  returned: always
  type: list
  elements: str
activated:
  description: Build ids activated that were not before.
  returned: always
  type: list
  elements: str
lock_written:
  description: Whether O(content) rewrote O(lock) (in check mode, would).
  returned: always
  type: bool
previous_lock:
  description: Where O(save_previous) wrote the builds the host had before.
  returned: when O(save_previous) was written
  type: str
message:
  description: backendmgr's own sentence for what it did.
  returned: success
  type: str
  sample: "synced with /etc/backendmgr/backendmgr.lock: installed llama-server@b100-vulkan"
warnings_backendmgr:
  description: Warnings backendmgr printed (also shown as Ansible warnings).
  returned: when there are any
  type: list
  elements: str
commands:
  description: The backendmgr command lines run.
  returned: always
  type: list
  elements: list
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes
from ansible_collections.backendmgr.fleet.plugins.module_utils.backendmgr import (
    COMMON_ARGS,
    BackendmgrError,
    build_state,
    changes,
    diff,
    run_module,
    with_activated,
)

PLAN_KEYS = ("install", "reinstall", "activate", "remove")


def _predict(before, plan):
    """The builds after the planned sync: installed ones added, removed ones gone, locked ones
    activated."""
    after = dict(before)
    for build_id in plan.get("install") or []:
        after.setdefault(build_id, False)
    for build_id in plan.get("remove") or []:
        after.pop(build_id, None)
    for build_id in plan.get("activate") or []:
        after = with_activated(after, build_id)
    return after


def _read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except (IOError, OSError):
        return None


def _write_lock(module, path, data):
    """Write ``data`` to ``path`` atomically (a temporary file in the same folder, renamed)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        os.makedirs(folder)
    fd, tmp = tempfile.mkstemp(prefix=".backendmgr-lock-", dir=folder)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    module.atomic_move(tmp, os.path.abspath(path))


def main():
    argument_spec = dict(COMMON_ARGS)
    argument_spec.update(
        lock=dict(type="path"),
        content=dict(type="str"),
        locked=dict(type="bool", default=False),
        prune=dict(type="bool", default=False),
        force=dict(type="bool", default=False),
        save_previous=dict(type="path"),
    )
    module = AnsibleModule(
        argument_spec=argument_spec,
        supports_check_mode=True,
        required_by=dict(content="lock", force="prune"),
    )
    run_module(module, sync)


def sync(module, cli):
    params = module.params
    lock = params["lock"]
    flags = [f for f in ("locked", "prune", "force") if params[f]]
    result = dict(changed=False, lock=lock, lock_written=False)
    data = old = None
    if params["content"] is not None:
        data = to_bytes(params["content"], errors="surrogate_or_strict")
        old = _read(lock)
        result["lock_written"] = old != data

    if module.check_mode:
        before = build_state(cli.builds())
        source = lock
        if data is not None:
            source = os.path.join(module.tmpdir, "backendmgr.lock")
            with open(source, "wb") as fh:
                fh.write(data)
        options = ["--" + f for f in flags] + ["--dry-run"]
        plan = cli.run(["sync"], options, [source] if source else [])
        after = _predict(before, plan)
        changed = any(plan.get(k) for k in PLAN_KEYS) or result["lock_written"]
        return _finish(module, result, plan, before, after, changed, lock)

    if params["save_previous"]:  # like a backup file: written, but not a change of the host
        saved = cli.run(["lock"], ["--output=%s" % params["save_previous"]])
        result["previous_lock"] = params["save_previous"]
        before = _locked_state(saved)
    else:
        before = build_state(cli.builds())
    if result["lock_written"]:
        _write_lock(module, lock, data)
    try:
        outcome = cli.run(["sync"], ["--" + f for f in flags], [lock] if lock else [])
    except BackendmgrError as exc:
        if result["lock_written"]:  # the lock on the host keeps saying what the host has
            _restore(module, lock, old)
            result["lock_written"] = False
        # a sync that fails part way may still have installed or activated other builds
        after = _state_or(cli, before)
        result.update(changes(before, after))
        result["builds"] = after
        if module._diff:
            result["diff"] = diff(before, after)
        module.fail_json(
            msg=exc.msg,
            rc=exc.rc,
            changed=after != before,
            commands=cli.commands,
            **dict((k, v) for k, v in result.items() if k != "changed")
        )
    after = _predict(before, outcome)  # what it did, as it says; no second listing needed
    changed = bool(outcome.get("changed")) or after != before or result["lock_written"]
    return _finish(module, result, outcome, before, after, changed, lock)


def _locked_state(doc):
    """Build id -> activated from ``lock --json`` (its builds and activated ids)."""
    activated = set((doc.get("activated") or {}).values())
    return dict((b, b in activated) for b in doc.get("builds") or [])


def _restore(module, path, data):
    if data is None:
        try:
            os.unlink(path)
        except OSError:
            pass
    else:
        _write_lock(module, path, data)


def _state_or(cli, fallback):
    try:
        return build_state(cli.builds())
    except BackendmgrError:
        return fallback


def _finish(module, result, doc, before, after, changed, lock):
    for key in PLAN_KEYS + ("kept",):
        result[key] = list(doc.get(key) or [])
    result["lock"] = doc.get("lock") or lock
    result["message"] = doc.get("message", "")
    result["builds"] = after
    result["changed"] = bool(changed)
    result.update(changes(before, after))
    warnings = doc.get("warnings") or []
    if warnings:
        result["warnings_backendmgr"] = list(warnings)
        for warning in warnings:
            module.warn(warning)
    if module._diff:
        result["diff"] = diff(before, after)
    return result


if __name__ == "__main__":
    main()
