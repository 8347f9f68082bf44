# Sourced by scripts/demo and scripts/test: make .venv and install the project into it when the
# installed distribution is missing or older than pyproject.toml. The check runs from / so that
# the checkout itself on sys.path cannot make a missing install look present.
# Usage: ensure_venv EXTRA   (EXTRA is "" for the package alone, "test" for the test tools too)
#        venv_ready EXTRA    (whether ensure_venv EXTRA has nothing to do)
venv_ready() {
  local extra=$1 here stamp want
  here=$(pwd)
  stamp=".venv/.backendmgr-installed${extra:+-$extra}"
  want="$(cksum <pyproject.toml) $here"
  [ -x .venv/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] &&
    (cd / && "$here/.venv/bin/python" -c 'import backendmgr.cli.main, anyio, httpx, pydantic, ruamel.yaml, filelock, rich') 2>/dev/null
}

ensure_venv() {
  local extra=$1 py=${PYTHON:-python3} spec=.
  [ -n "$extra" ] && spec=".[$extra]"
  venv_ready "$extra" && return 0
  if [ ! -x .venv/bin/python ]; then
    "$py" -m venv .venv
  fi
  echo "setting up .venv (installing backendmgr${extra:+ with its $extra tools})…" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check -e "$spec"
  echo "$(cksum <pyproject.toml) $(pwd)" >".venv/.backendmgr-installed${extra:+-$extra}"
}
