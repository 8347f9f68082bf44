#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: backendmgr contributors
# MIT License (see LICENSE or https://opensource.org/licenses/MIT)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: backendmgr_model
short_description: Pin, unpin or set overrides for one backendmgr model
description:
  - Runs C(backendmgr pin), C(unpin), C(set) and C(unset) for one model on the managed host;
    each regenerates the llama-swap config when it changed something.
  - C(changed) is what backendmgr reports, true only when the stored pin or overrides changed.
  - Check mode reads the stored overrides (C(backendmgr config show --json)) and says whether
    the real run would change them; nothing is written.
  - Diff mode shows the model's overrides before and after.
version_added: "0.1.0"
author:
  - backendmgr contributors (!UNKNOWN)
extends_documentation_fragment:
  - backendmgr.fleet.backendmgr
attributes:
  check_mode:
    description: In check mode nothing changes and C(changed) predicts the real run.
    support: full
  diff_mode:
    description: Shows the model's overrides before and after.
    support: full
options:
  name:
    description:
      - The model id, as C(backendmgr models) shows it. A model not discovered (yet) is
        accepted, with a warning.
    type: str
    required: true
    aliases: [model]
  backend:
    description:
      - Pin the model to this registry row, for example C(llama-server@b11211-rocm).
    type: str
  unpin:
    description:
      - Clear the model's pin so that it follows the class default again.
    type: bool
    default: false
  settings:
    description:
      - Overrides to set, key to value, for example C(ctx), C(extra_args), C(vllm_gpu_util),
        C(unlisted) or C(llama_swap) (a mapping). See C(backendmgr set --help).
    type: dict
  unset:
    description:
      - Override keys to clear.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Keep qwen3 on the ROCm build, with a longer context
  backendmgr.fleet.backendmgr_model:
    name: qwen3-8b-q4_k_m
    backend: llama-server@b11211-rocm
    settings:
      ctx: 32768
      extra_args: --seed 1

- name: Let it follow the activated build again
  backendmgr.fleet.backendmgr_model:
    name: qwen3-8b-q4_k_m
    unpin: true
    unset: [extra_args]
"""

RETURN = r"""
model:
  description: The model id.
  returned: always
  type: str
before:
  description: The model's stored overrides before.
  returned: always
  type: dict
after:
  description: The model's stored overrides after (in check mode, as predicted).
  returned: always
  type: dict
  sample: {"backend": "llama-server@b11211-rocm", "ctx": 32768}
messages:
  description: backendmgr's sentence for each command run.
  returned: always
  type: list
  elements: str
commands:
  description: The backendmgr command lines run.
  returned: always
  type: list
  elements: list
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.backendmgr.fleet.plugins.module_utils.backendmgr import (
    COMMON_ARGS,
    BackendmgrError,
    run_module,
)


# the keys of a set/unset result that are not overrides
RESULT_KEYS = ("message", "changed", "warnings", "model")


def main():
    argument_spec = dict(COMMON_ARGS)
    argument_spec.update(
        name=dict(type="str", required=True, aliases=["model"]),
        backend=dict(type="str"),
        unpin=dict(type="bool", default=False),
        settings=dict(type="dict"),
        unset=dict(type="list", elements="str"),
    )
    module = AnsibleModule(
        argument_spec=argument_spec,
        supports_check_mode=True,
        mutually_exclusive=[("backend", "unpin")],
        required_one_of=[("backend", "unpin", "settings", "unset")],
    )
    run_module(module, model)


def _text(value):
    """A value as ``set KEY=VALUE`` takes it: booleans as true/false, mappings as YAML flow
    (JSON is YAML), the rest as written."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return value if isinstance(value, str) else str(value)


def _same(stored, wanted):
    """Whether ``set`` would leave ``stored`` as it is: compared as backendmgr stores it
    (numbers as numbers, booleans as booleans, text as text)."""
    if stored is None:
        return False
    if isinstance(stored, bool) or isinstance(wanted, bool):
        return _text(stored) == _text(wanted).lower()
    if isinstance(stored, (int, float)) and not isinstance(stored, bool):
        try:
            return float(stored) == float(wanted)
        except (TypeError, ValueError):
            return False
    if isinstance(stored, dict):
        if isinstance(wanted, str):
            try:
                wanted = json.loads(wanted)
            except ValueError:
                return False
        return stored == wanted
    return _text(stored) == _text(wanted)


def _overrides(cli, name):
    doc = cli.run("config", "show")
    models = ((doc.get("settings") or {}).get("models")) or {}
    stored = models.get(name) or {}
    return dict((k, v) for k, v in stored.items() if v is not None)


def model(module, cli):
    params = module.params
    name = params["name"]
    settings = params["settings"] or {}
    for key, value in settings.items():
        if value is None:
            raise BackendmgrError('settings.%s has no value; use unset: [%s] to clear it' % (key, key))
    before = _overrides(cli, name)
    predicted = dict(before)
    steps = []  # (command line, would it change?)
    if params["backend"]:
        steps.append((["pin", name, params["backend"]], before.get("backend") != params["backend"]))
        predicted["backend"] = params["backend"]
    if params["unpin"]:
        steps.append((["unpin", name], "backend" in before))
        predicted.pop("backend", None)
    if settings:
        pairs = ["%s=%s" % (key, _text(value)) for key, value in sorted(settings.items())]
        differs = [key for key, value in settings.items() if not _same(before.get(key), value)]
        steps.append((["set", name] + pairs, bool(differs)))
        for key in differs:
            predicted[key] = settings[key]
    if params["unset"]:
        steps.append((["unset", name] + list(params["unset"]), any(k in before for k in params["unset"])))
        for key in params["unset"]:
            predicted.pop(key, None)

    result = dict(model=name, before=before, messages=[])
    if module.check_mode:
        result["changed"] = any(step[1] for step in steps)
        result["after"] = predicted
    else:
        changed = False
        after = predicted
        # backendmgr decides what changed, after validating the values
        for argv in [step[0] for step in steps]:
            doc = cli.run(*argv)
            changed = changed or bool(doc.get("changed"))
            result["messages"].append(doc.get("message", ""))
            for warning in doc.get("warnings") or []:
                module.warn(warning)
            if argv[0] in ("set", "unset"):  # the overrides as stored, typed
                after = dict((k, v) for k, v in doc.items() if k not in RESULT_KEYS and v is not None)
        result["changed"] = changed
        result["after"] = after
    if module._diff:
        result["diff"] = dict(
            before=json.dumps(before, indent=2, sort_keys=True) + "\n",
            after=json.dumps(result["after"], indent=2, sort_keys=True) + "\n",
            before_header="%s overrides before" % name,
            after_header="%s overrides after" % name,
        )
    return result


if __name__ == "__main__":
    main()
