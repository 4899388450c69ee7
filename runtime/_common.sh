# shellcheck shell=bash
# Shared helpers for the scripts in runtime/ (sourced, never run). Every value comes from runtime/config.yaml
# through `python -m kgserve.runtime_config env`, read once per script into KG_* variables.
#
# Inputs (environment, all optional):
#   KG_REPO    repository root (default: the folder above this file; PBS jobs get it through qsub -v)
#   KG_CONFIG  config file (default: $KG_REPO/runtime/config.yaml)
#   KG_PYTHON  interpreter that can import kgserve's dependencies (default: first working of
#              $VIRTUAL_ENV/bin/python, $KG_REPO/.venv/bin/python, python3)

kg_log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
kg_die() { printf '%s: error: %s\n' "${KG_SCRIPT:-${0##*/}}" "$*" >&2; exit 1; }

kg_find_python() {
  local candidate
  for candidate in "${KG_PYTHON:-}" "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}" "$KG_REPO/.venv/bin/python" python3; do
    [ -n "$candidate" ] || continue
    if PYTHONPATH="$KG_REPO${PYTHONPATH:+:$PYTHONPATH}" "$candidate" -c 'import pydantic, yaml' >/dev/null 2>&1; then
      KG_PY="$candidate"
      return 0
    fi
  done
  kg_die "no Python with the project's dependencies (tried KG_PYTHON, \$VIRTUAL_ENV, $KG_REPO/.venv, python3);
create it on the login node: python3 -m venv .venv && .venv/bin/pip install -e ."
}

# kg_load_config: sets KG_REPO, KG_CONFIG, KG_PY and every KG_<SECTION>_<KEY> of the config file.
kg_load_config() {
  KG_REPO="${KG_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
  KG_CONFIG="${KG_CONFIG:-$KG_REPO/runtime/config.yaml}"
  [ -f "$KG_CONFIG" ] || kg_die "no config file at $KG_CONFIG (set KG_CONFIG or KG_REPO)"
  kg_find_python
  local values
  values="$(PYTHONPATH="$KG_REPO${PYTHONPATH:+:$PYTHONPATH}" "$KG_PY" -m kgserve.runtime_config --config "$KG_CONFIG" env)" \
    || kg_die "cannot read $KG_CONFIG (see the message above)"
  eval "$values"
  export KG_REPO KG_CONFIG KG_PY
}

# kg_runtime_config ARGS...: run the config helper (get/pin) against $KG_CONFIG.
kg_runtime_config() {
  PYTHONPATH="$KG_REPO${PYTHONPATH:+:$PYTHONPATH}" "$KG_PY" -m kgserve.runtime_config --config "$KG_CONFIG" "$@"
}
