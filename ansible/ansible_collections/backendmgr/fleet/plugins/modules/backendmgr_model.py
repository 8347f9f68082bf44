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
  - Check mode runs the same commands with C(--dry-run), so backendmgr itself validates the
    values and says whether the real run would change the stored overrides; nothing is written.
  - Diff mode shows the model's overrides before and after.
version_added: "0.1.0"
author:
  - backendmgr contributors (!UNKNOWN)
extends_documentation_fragment:
  - backendmgr.fleet.backendmgr
attributes:
  check_mode:
    description: In check mode nothing changes and C(changed) is what the real run reports.
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
  description: The model's stored overrides after (in check mode, as backendmgr's dry runs
    report them).
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


def _quoted(word):
    """One shell word, as ``set env=`` splits them."""
    return "'%s'" % word.replace("'", "'\"'\"'")


def _text(key, value):
    """A value as ``set KEY=VALUE`` takes it: booleans as true/false, mappings as YAML flow
    (JSON is YAML), a list of ``env`` words quoted like a shell, other lists comma-joined
    (``device: [0, 1]``), the rest as written. backendmgr validates and compares it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, list):
        if key == "env":
            return " ".join(_quoted(_text(key, v)) for v in value)
        return ",".join(_text(key, v) for v in value)
    return value if isinstance(value, str) else str(value)


def _overrides(cli, name):
    doc = cli.run(["config", "show"])
    models = ((doc.get("settings") or {}).get("models")) or {}
    stored = models.get(name) or {}
    return dict((k, v) for k, v in stored.items() if v is not None)


def model(module, cli):
    params = module.params
    name = params["name"]
    settings = params["settings"] or {}
    for key, value in settings.items():
        if value is None:
            raise BackendmgrError("settings.%s has no value; use unset: [%s] to clear it" % (key, key))
    steps = []  # (command, its operands, the override keys it touches)
    if params["backend"]:
        steps.append(("pin", [name, params["backend"]], ["backend"]))
    if params["unpin"]:
        steps.append(("unpin", [name], ["backend"]))
    if settings:
        pairs = ["%s=%s" % (key, _text(key.strip(), value)) for key, value in sorted(settings.items())]
        steps.append(("set", [name] + pairs, [key.strip() for key in settings]))
    if params["unset"]:
        steps.append(("unset", [name] + list(params["unset"]), list(params["unset"])))

    before = _overrides(cli, name)
    after = dict(before)
    changed = False
    messages = []
    # Check mode asks backendmgr the same question with --dry-run: its own validation and
    # comparison decide "changed", never a guess made here.
    dry = ["--dry-run"] if module.check_mode else []
    for command, operands, keys in steps:
        doc = cli.run([command], dry, operands)
        changed = changed or bool(doc.get("changed"))
        messages.append(doc.get("message", ""))
        for warning in doc.get("warnings") or []:
            module.warn(warning)
        for key in keys:  # as backendmgr stores it (typed), or gone
            if doc.get(key) is None:
                after.pop(key, None)
            else:
                after[key] = doc[key]

    result = dict(model=name, before=before, after=after, changed=changed, messages=messages)
    if module._diff:
        result["diff"] = dict(
            before=json.dumps(before, indent=2, sort_keys=True) + "\n",
            after=json.dumps(after, indent=2, sort_keys=True) + "\n",
            before_header="%s overrides before" % name,
            after_header="%s overrides after" % name,
        )
    return result


if __name__ == "__main__":
    main()
