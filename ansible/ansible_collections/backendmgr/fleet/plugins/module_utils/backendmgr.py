# -*- coding: utf-8 -*-
# Copyright: backendmgr contributors
# MIT License (see LICENSE or https://opensource.org/licenses/MIT)
"""What every backendmgr module shares: running the command line with ``--json`` on the managed
host, turning its one-line errors into ``fail_json`` (never a traceback), and describing the
builds before and after for ``changed`` and diff mode.

The modules talk to backendmgr only through its command line, so the managed host may run any
Python for Ansible and have backendmgr installed elsewhere (pipx, a venv). Every value a task
gives goes after ``--`` (or as ``--option=VALUE``), so no value is ever read as an option: a
model named ``--config=x`` is a model id, never another config file (issue 29)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

MAX_MSG = 2000

COMMON_ARGS = dict(
    executable=dict(type="str", default="backendmgr"),
    home=dict(type="path"),
    config=dict(type="path"),
    github_api=dict(type="str"),
)


class BackendmgrError(Exception):
    """A command that failed, with the one line to show and what it printed as JSON."""

    def __init__(self, msg, rc=None, doc=None):
        super(BackendmgrError, self).__init__(msg)
        self.msg = msg
        self.rc = rc
        self.doc = doc


def one_line(text):
    """Whitespace (newlines included) collapsed, bounded: Ansible shows ``msg`` on one line."""
    line = " ".join(str(text).split())
    return line if len(line) <= MAX_MSG else line[: MAX_MSG - 1] + "\u2026"


def _error_line(stderr):
    """The CLI's own ``error: …`` line from stderr (without the prefix), or None."""
    found = None
    for line in stderr.splitlines():
        if line.startswith("error:"):
            found = line[len("error:") :].strip()
    return found


class Backendmgr(object):
    """The backendmgr command line on this host, as the module's options configure it."""

    def __init__(self, module):
        self.module = module
        params = module.params
        exe = params["executable"]
        if "/" in exe or exe.startswith("~"):
            path = os.path.expanduser(exe)
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                raise BackendmgrError(
                    "%s is not an executable file; set the executable option to backendmgr's path"
                    % exe
                )
        else:
            path = module.get_bin_path(exe)
            if path is None:
                raise BackendmgrError(
                    '"%s" is not on PATH; install backendmgr there or set the executable option'
                    % exe
                )
        self.exe = path
        self.globals = []
        for flag in ("home", "config"):
            if params.get(flag):  # one word: a path that starts with "-" stays the value
                self.globals.append("--%s=%s" % (flag, params[flag]))
        self.env = {}
        if params.get("github_api"):
            self.env["BACKENDMGR_GITHUB_API"] = params["github_api"]
        self.commands = []  # every command line run, for the result

    def call(self, command, options=(), operands=(), ok_codes=(0,)):
        """Run ``backendmgr --json COMMAND OPTIONS -- OPERANDS``; return ``(rc, document)`` or
        raise BackendmgrError with the CLI's one-line error. Task values are OPERANDS (or
        ``--option=VALUE`` words in OPTIONS): the ``--`` written here, once for every module,
        means none of them is ever read as an option."""
        argv = [self.exe, "--json"] + self.globals + list(command) + list(options)
        if operands:  # a command without operands refuses a bare "--"
            argv += ["--"] + list(operands)
        self.commands.append(argv)
        rc, out, err = self.module.run_command(
            argv, environ_update=self.env, check_rc=False, errors="surrogate_or_replace"
        )
        doc = None
        try:
            doc = json.loads(out) if out.strip() else None
        except ValueError:
            doc = None
        failed = isinstance(doc, dict) and set(doc) == set(["error", "exit"])
        if rc in ok_codes and doc is not None and not failed:
            return rc, doc
        if isinstance(doc, dict) and doc.get("error"):
            msg = doc["error"]
        else:
            msg = _error_line(err)
        if not msg:
            tail = (err.strip() or out.strip()).splitlines()[-1:] or ["no output"]
            what = "printed no JSON" if rc in ok_codes else "exited with status %s" % rc
            msg = "backendmgr %s %s: %s" % (" ".join(command), what, tail[0])
        raise BackendmgrError(one_line(msg), rc=rc, doc=doc)

    def run(self, command, options=(), operands=()):
        return self.call(command, options, operands)[1]

    def builds(self):
        """``list --json``: the installed builds, each a dict with at least id, component and
        activated."""
        rows = self.run(["list"])
        if not isinstance(rows, list):
            raise BackendmgrError("backendmgr list --json did not print a list")
        return rows


def build_state(rows):
    """Build id -> activated, from ``list --json`` rows."""
    return dict((row["id"], bool(row.get("activated"))) for row in rows)


def component_of(build_id):
    return build_id.split("@", 1)[0]


def with_activated(state, build_id):
    """``state`` after activating ``build_id``: the other builds of its component are not."""
    out = dict(state)
    component = component_of(build_id)
    for other in out:
        if component_of(other) == component:
            out[other] = False
    out[build_id] = True
    return out


def describe(state):
    """One line per build, for diff mode: ``llama-server@b100-vulkan (activated)``."""
    lines = [b + (" (activated)" if state[b] else "") for b in sorted(state)]
    return "\n".join(lines) + ("\n" if lines else "")


def changes(before, after):
    """What diff mode and the result say: builds added, removed and newly activated."""
    return dict(
        added=sorted(b for b in after if b not in before),
        removed=sorted(b for b in before if b not in after),
        activated=sorted(b for b in after if after[b] and not before.get(b)),
    )


def diff(before, after, header="builds"):
    return dict(
        before=describe(before),
        after=describe(after),
        before_header="%s before" % header,
        after_header="%s after" % header,
    )


def run_module(module, body):
    """Call ``body(module, cli)``; every failure becomes ``fail_json`` with one line.

    ``body`` returns the result dict (it may call ``exit_json``/``fail_json`` itself)."""
    extra = {}
    try:
        cli = Backendmgr(module)
        extra["commands"] = cli.commands
        result = body(module, cli)
    except BackendmgrError as exc:
        if exc.rc is not None:
            extra["rc"] = exc.rc
        module.fail_json(msg=exc.msg, **extra)
    except Exception as exc:  # a bug or an unexpected answer: one line, never a traceback
        module.fail_json(msg=one_line("%s: %s" % (type(exc).__name__, exc)), **extra)
    result.setdefault("commands", cli.commands)
    module.exit_json(**result)
