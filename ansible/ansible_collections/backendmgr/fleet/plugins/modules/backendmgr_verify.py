#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: backendmgr contributors
# MIT License (see LICENSE or https://opensource.org/licenses/MIT)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: backendmgr_verify
short_description: Start every (or the named) backendmgr model once and fail on the first bad one
description:
  - Runs C(backendmgr verify) on the managed host; each model's emitted command is started on a
    free loopback port, sent one request fitting its role, and stopped.
  - The host fails when a model does not serve, with each failed model and its reason in
    C(msg).
  - Never changes the host's builds or config, so C(changed) is always false. Check mode does
    not run it (it starts servers); Ansible reports the task as skipped.
version_added: "0.1.0"
author:
  - backendmgr contributors (!UNKNOWN)
extends_documentation_fragment:
  - backendmgr.fleet.backendmgr
attributes:
  check_mode:
    description: Does not run in check mode, because it starts servers.
    support: none
  diff_mode:
    description: Changes nothing, so there is nothing to show.
    support: none
options:
  models:
    description:
      - Model ids to verify. Default is every model the generated config runs.
    type: list
    elements: str
    default: []
  timeout:
    description:
      - Seconds each model has to become healthy. Default is the config's
        C(health_check_timeout).
    type: float
  keep_going:
    description:
      - Check the other models after a failure, so that C(msg) names every failed model.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Every model on the host serves with the builds it now has
  backendmgr.fleet.backendmgr_verify:

- name: Only the two chat models, a minute each
  backendmgr.fleet.backendmgr_verify:
    models: [qwen3-8b-q4_k_m, llama-3.1-8b]
    timeout: 60
"""

RETURN = r"""
results:
  description: One entry per model run, as C(backendmgr verify --json) reports it.
  returned: when backendmgr ran
  type: list
  elements: dict
  sample: [{"id": "qwen3-8b", "ok": true, "reason": null, "ready_s": 2.1, "gpu_gib": 6.3}]
failed_models:
  description: Model id to the reason it failed.
  returned: when backendmgr ran
  type: dict
  sample: {"qwen3-8b": "exited with status 1 before it was healthy"}
verified:
  description: How many models served.
  returned: when backendmgr ran
  type: int
commands:
  description: The backendmgr command lines run.
  returned: always
  type: list
  elements: list
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.backendmgr.fleet.plugins.module_utils.backendmgr import (
    COMMON_ARGS,
    one_line,
    run_module,
)


def main():
    argument_spec = dict(COMMON_ARGS)
    argument_spec.update(
        models=dict(type="list", elements="str", default=[]),
        timeout=dict(type="float"),
        keep_going=dict(type="bool", default=True),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=False)
    run_module(module, verify)


def verify(module, cli):
    params = module.params
    options = []
    if params["timeout"] is not None:
        options.append("--timeout=%r" % float(params["timeout"]))
    if params["keep_going"]:
        options.append("--keep-going")
    # exit 1 with a report is "some model failed", not a broken command
    rc, doc = cli.call(["verify"], options, params["models"], ok_codes=(0, 1))
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ValueError("backendmgr verify --json printed no results")
    results = doc["results"]
    failed = dict((r.get("id"), r.get("reason") or "failed") for r in results if not r.get("ok"))
    result = dict(
        changed=False,
        results=results,
        failed_models=failed,
        verified=len(results) - len(failed),
        commands=cli.commands,
    )
    if failed or rc != 0:
        reasons = "; ".join("%s: %s" % (k, v) for k, v in sorted(failed.items()))
        msg = "%d of %d models failed verification: %s" % (len(failed), len(results), reasons)
        module.fail_json(msg=one_line(msg), rc=rc, **result)
    result["msg"] = "%d models served" % len(results) if results else "no models to verify"
    return result


if __name__ == "__main__":
    main()
