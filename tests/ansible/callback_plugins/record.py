"""An Ansible callback for the tests: every task result of a playbook run, one JSON line each,
appended to the file ``BACKENDMGR_TEST_RECORD`` names (the recap alone cannot tell which task
changed what)."""

from __future__ import annotations

import json
import os
from typing import Any

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):  # type: ignore[misc]
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "record"
    CALLBACK_NEEDS_ENABLED = True

    def _note(self, result: Any, status: str) -> None:
        data = getattr(result, "result", None)
        if not isinstance(data, dict):
            data = result._result
        line = {
            "host": result._host.get_name(),
            "task": result._task.get_name(),
            "status": status,
            "changed": bool(data.get("changed")),
            "result": data,
        }
        with open(os.environ["BACKENDMGR_TEST_RECORD"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, default=str) + "\n")

    def v2_runner_on_ok(self, result: Any) -> None:
        self._note(result, "ok")

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._note(result, "failed")

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._note(result, "skipped")

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._note(result, "unreachable")
