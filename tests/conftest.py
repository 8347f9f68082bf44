"""Registers the shared fixtures; they and every helper live in ``tests/support``."""

from tests.support.fixtures import (  # noqa: F401  (fixtures)
    _isolated_env,
    cli,
    config_path,
    mirror,
    mirror_root,
    pytest_collection_modifyitems,
    pytest_configure,
    setup,
)
from tests.support.realllama import real_llama, real_llama_cached  # noqa: F401
