"""Every command, its module in ``cli/commands/`` and its help, in ``--help`` order: the static
table that lets a run build only its own command's parser, and <TAB> on a command name answer
without building any (it imports nothing)."""

from __future__ import annotations

__all__ = ["COMMANDS", "FIRST_IDS"]

COMMANDS: dict[str, tuple[str, str | None]] = {
    "catalog": ("builds", "components, variants here, suggested variant and why"),
    "releases": ("builds", "recent versions and the variants each ships here"),
    "install": ("builds", "install a build (VERSION defaults to the latest)"),
    "uninstall": ("builds", "remove installed builds (all or none)"),
    "activate": ("builds", "switch the activated build of a component"),
    "list": ("builds", "installed builds"),
    "doctor": ("builds", "registry vs disk, stale pins, leftovers"),
    "backends": ("backends", "the registry in order; add or remove manual rows"),
    "default": ("backends", "make ROW the ★ of every class its kind serves"),
    "pin": ("pin", "keep MODEL on one registry row (e.g. a build)"),
    "unpin": ("pin", "let MODEL follow the class default again"),
    "set": ("overrides", "set per-model overrides (ctx, vllm_gpu_util, extra_args, …)"),
    "unset": ("overrides", "clear per-model overrides"),
    "models": ("models", "discovered models, the row each resolves to, and why"),
    "cmd": ("models", "print the command line a model gets"),
    "generate": ("models", "regenerate the llama-swap config"),
    "update": ("maintenance", "install and activate the newest release of installed components"),
    "prune": ("maintenance", "remove builds neither activated nor pinned"),
    "cache": ("maintenance", "the download and release-listing cache"),
    "which": ("maintenance", "the executable that would run, and why"),
    "config": ("maintenance", "where the files are; the effective settings"),
    "lock": (
        "lock",
        "write backendmgr.lock: the exact builds installed here and the activated ones",
    ),
    "sync": ("lock", "install, verify and activate exactly the builds of a lock"),
    "fetch": ("lock", "download every asset of a lock into DIR, laid out for scripts/mirror.py"),
    "completion": ("completion", "print a shell completion script"),
    "__complete": ("completion", None),  # hidden: no help keeps it out of the command list
    "verify": ("verify", "start each model's command once, send one request, stop it"),
    "tune": ("tune", "find the largest context that starts and fits the memory budget"),
    "bench": ("bench", "prompt and generation speed of models per build, measured"),
    "bisect": ("bisect", "find the first release that made a model slower or stop starting"),
    "up": ("swap", "run llama-swap on the generated config, in the foreground"),
    "service": ("swap", "run llama-swap as a background service (systemd/launchd)"),
    "status": ("swap", "whether llama-swap runs, and what it serves"),
    "serve": ("serve", "a local web page and HTTP API over the same operations"),
}

# What the first argument of these commands names (ids from local state, in this order): <TAB>
# there is answered from the read memo without building a parser; tests/cli/test_fastread.py
# holds this to what completion's walk over the real parser finds.
FIRST_IDS: dict[str, tuple[str, ...]] = {
    "install": ("components",),
    "releases": ("components",),
    "uninstall": ("builds",),
    "activate": ("builds",),
    "list": ("components",),
    "default": ("rows",),
    "pin": ("models",),
    "unpin": ("models",),
    "set": ("models",),
    "unset": ("models",),
    "cmd": ("models",),
    "which": ("models", "components", "builds"),
    "update": ("components",),
    "prune": ("components",),
    "verify": ("models",),
    "bench": ("models",),
    "bisect": ("models",),
}
