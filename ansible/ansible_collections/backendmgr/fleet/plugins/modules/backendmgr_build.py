#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: backendmgr contributors
# MIT License (see LICENSE or https://opensource.org/licenses/MIT)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: backendmgr_build
short_description: Install, uninstall or activate one backendmgr build
description:
  - O(state=present) installs the build when no build matching O(component), O(version) and
    O(variant) is installed (C(backendmgr install)); O(state=activated) also makes it the
    component's activated build (C(backendmgr activate), or C(install --activate));
    O(state=absent) uninstalls every matching build (C(backendmgr uninstall)).
  - Idempotent; C(changed) only when a build was installed, activated or removed.
  - Check mode runs the same commands (C(install), C(activate), C(uninstall)) with
    C(--dry-run), so the checks and the answer are backendmgr's own; nothing changes.
  - Diff mode shows the host's builds before and after.
version_added: "0.1.0"
author:
  - backendmgr contributors (!UNKNOWN)
extends_documentation_fragment:
  - backendmgr.fleet.backendmgr
attributes:
  check_mode:
    description: In check mode nothing changes and C(changed) is what backendmgr's dry run reports.
    support: full
  diff_mode:
    description: Shows the host's builds before and after, the activated ones marked.
    support: full
options:
  component:
    description:
      - The component, for example C(llama-server) or C(vllm) (see C(backendmgr catalog)).
    type: str
    required: true
    aliases: [name]
  version:
    description:
      - The release, for example C(b11211).
      - Without it, O(state=present) and O(state=activated) accept any installed version and
        install the newest release only when none is installed.
      - Required with O(state=absent).
    type: str
  variant:
    description:
      - The variant, for example C(vulkan) or C(cuda). Without it, any installed variant
        matches and an install takes the variant backendmgr suggests for this host.
    type: str
  state:
    description:
      - V(present) installed, V(activated) installed and activated, V(absent) uninstalled.
    type: str
    choices: [present, activated, absent]
    default: present
  force:
    description:
      - With O(state=absent), uninstall even when models are pinned to the build (their pins
        fall back).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: The Vulkan build of llama.cpp b11211, activated
  backendmgr.fleet.backendmgr_build:
    component: llama-server
    version: b11211
    variant: vulkan
    state: activated

- name: Some vLLM installed
  backendmgr.fleet.backendmgr_build:
    component: vllm

- name: The old build gone
  backendmgr.fleet.backendmgr_build:
    component: llama-server
    version: b5000
    state: absent
"""

RETURN = r"""
build:
  description: The build installed, activated or removed (the first one for V(absent)).
  returned: when one matched or was installed
  type: str
  sample: llama-server@b11211-vulkan
builds:
  description: The host's builds afterwards (in check mode, as backendmgr's dry run plans them), id to activated.
  returned: always
  type: dict
  sample: {"llama-server@b11211-vulkan": true}
added:
  description: Build ids installed.
  returned: always
  type: list
  elements: str
removed:
  description: Build ids removed.
  returned: always
  type: list
  elements: str
activated:
  description: Build ids newly activated.
  returned: always
  type: list
  elements: str
message:
  description: backendmgr's own sentence for what it did.
  returned: when backendmgr ran a change
  type: str
commands:
  description: The backendmgr command lines run.
  returned: always
  type: list
  elements: list
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.backendmgr.fleet.plugins.module_utils.backendmgr import (
    COMMON_ARGS,
    BackendmgrError,
    build_state,
    changes,
    diff,
    run_module,
    with_activated,
)


def main():
    argument_spec = dict(COMMON_ARGS)
    argument_spec.update(
        component=dict(type="str", required=True, aliases=["name"]),
        version=dict(type="str"),
        variant=dict(type="str"),
        state=dict(type="str", default="present", choices=["present", "activated", "absent"]),
        force=dict(type="bool", default=False),
    )
    module = AnsibleModule(
        argument_spec=argument_spec,
        supports_check_mode=True,
        required_if=[("state", "absent", ["version"])],
    )
    run_module(module, build)


def build(module, cli):
    params = module.params
    rows = cli.builds()
    before = build_state(rows)
    matching = [
        row
        for row in rows
        if row.get("component") == params["component"]
        and params["version"] in (None, row.get("version"))
        and params["variant"] in (None, row.get("variant"))
    ]
    state = params["state"]
    result = dict(changed=False)
    if state == "absent":
        ids = [row["id"] for row in matching]
        if not ids:
            return _finish(module, result, before, before)
        result["build"] = ids[0]
        after = dict((b, a) for b, a in before.items() if b not in ids)
        # the same command in check mode, with --dry-run: backendmgr's refusals either way
        flags = (["--force"] if params["force"] else []) + _dry(module)
        doc = cli.run(["uninstall"], flags, ids)
        gone = doc.get("ids") or ids
        return _finish(module, result, before, dict((b, a) for b, a in before.items() if b not in gone), doc)

    target = _chosen(matching, state)
    if target is None:  # not installed: install it (and activate when asked)
        options = []
        if params["variant"]:
            options.append("--variant=%s" % params["variant"])
        if state == "activated":
            options.append("--activate")
        options += _dry(module)
        operands = [params["component"]] + ([params["version"]] if params["version"] else [])
        if module.check_mode:
            plan = cli.run(["install"], options, operands)
            result["build"] = plan["id"]
            after = dict(before)
            after.setdefault(plan["id"], False)
            # install activates when asked, or when the component has no activated build
            component_active = any(
                r.get("activated") and r.get("component") == params["component"] for r in rows
            )
            if state == "activated" or not component_active:
                after = with_activated(after, plan["id"])
            return _finish(module, result, before, after)
        doc = cli.run(["install"], options, operands)
        result["build"] = doc["id"]
        after = dict(before)
        after.setdefault(doc["id"], False)
        if doc.get("activated"):
            after = with_activated(after, doc["id"])
        return _finish(module, result, before, after, doc)

    result["build"] = target["id"]
    if state == "present" or target.get("activated"):
        return _finish(module, result, before, before)
    doc = cli.run(["activate"], _dry(module), [target["id"]])
    after = with_activated(before, target["id"]) if doc.get("changed") else before
    return _finish(module, result, before, after, doc)


def _dry(module):
    """Check mode asks backendmgr, with the real command's --dry-run, never a guess."""
    return ["--dry-run"] if module.check_mode else []


def _chosen(matching, state):
    """The installed build that satisfies the task, or None when one must be installed."""
    if not matching:
        return None
    active = [row for row in matching if row.get("activated")]
    if active:
        return active[0]
    if state == "activated" and len(matching) > 1:
        raise BackendmgrError(
            "several installed builds match (%s); give version and variant to say which one to "
            "activate" % ", ".join(sorted(row["id"] for row in matching))
        )
    return matching[0]


def _finish(module, result, before, after, doc=None):
    result.update(changes(before, after))
    result["builds"] = after
    result["changed"] = after != before or bool(doc and doc.get("changed"))
    if doc is not None:
        result["message"] = doc.get("message", "")
        for warning in doc.get("warnings") or []:
            module.warn(warning)
    if module._diff:
        result["diff"] = diff(before, after)
    return result


if __name__ == "__main__":
    main()
