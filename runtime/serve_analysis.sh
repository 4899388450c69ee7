#!/usr/bin/env bash
# Analyse the sample positions (or your own) through kgserve, interactively or for one file.
#
#   runtime/serve_analysis.sh [-o PATH] [-y] [--ready-timeout S] [KGSERVE OPTIONS...] [INPUT]
#
#   INPUT                a basename in assets/analysis/inputs/ (".json" may be left out) or a path; given: analyse
#                        it and exit; not given: list the inputs and prompt for basenames until an empty line
#   -o PATH              where to write the response: a file, or a folder for <stem>.jsonl
#                        (default: assets/analysis/outputs/<stem>.jsonl)
#   -y, --yes            overwrite an existing output without asking (otherwise it asks; default answer: no)
#   --ready-timeout S    how long to wait for /readyz, whole seconds (default: the backend's startup_timeout_s + 30)
#   --use-running        use a server already on the port even when its /readyz names another backend or model
#                        than the configured one (or a simulated engine for a real one); without it: refused
#   KGSERVE OPTIONS      passed to `python -m kgserve`: --backend NAME, --config PATH, --port N, --host H, ...
#
# Starts kgserve unless something already answers on the configured host and port (server.host/server.port
# in runtime/config.yaml, or --host/--port; a server there must serve the configured backend and model, or
# --use-running), waits for /readyz with progress and a timeout, POSTs the file
# to /analysis and prints the equivalent same-node curl command. A server this script started is stopped
# when it exits (Ctrl-C included); a server it found running is left alone.
set -euo pipefail
KG_SCRIPT=serve_analysis.sh
# shellcheck source=runtime/_common.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/_common.sh"

usage() { awk 'NR == 1 || /^#PBS/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"; }

output_opt=""
assume_yes=0
ready_timeout=""
use_running=0
input_arg=""
passthrough=()
port_override=""
host_override=""
backend_override=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    -o|--output) output_opt="${2:?-o needs a path}"; shift 2 ;;
    -y|--yes) assume_yes=1; shift ;;
    --ready-timeout) ready_timeout="${2:?--ready-timeout needs seconds}"; shift 2 ;;
    --ready-timeout=*) ready_timeout="${1#*=}"; shift ;;
    --use-running) use_running=1; shift ;;
    --config) KG_CONFIG="${2:?--config needs a path}"; shift 2 ;;
    --port) port_override="${2:?--port needs a number}"; passthrough+=("$1" "$2"); shift 2 ;;
    --host) host_override="${2:?--host needs a host}"; passthrough+=("$1" "$2"); shift 2 ;;
    --backend) backend_override="${2:?--backend needs a name}"; passthrough+=("$1" "$2"); shift 2 ;;
    --config=*) KG_CONFIG="${1#*=}"; shift ;;
    --port=*) port_override="${1#*=}"; passthrough+=("$1"); shift ;;
    --host=*) host_override="${1#*=}"; passthrough+=("$1"); shift ;;
    --backend=*) backend_override="${1#*=}"; passthrough+=("$1"); shift ;;
    -*) passthrough+=("$1"); shift ;;
    *) [ -z "$input_arg" ] || kg_die "one INPUT at most (got '$input_arg' and '$1')"; input_arg="$1"; shift ;;
  esac
done
# numbers are checked before anything starts: `--ready-timeout 5s` is refused, not compared every second
if [ -n "$ready_timeout" ] && ! [[ "$ready_timeout" =~ ^[0-9]+$ ]]; then
  kg_die "--ready-timeout takes whole seconds (e.g. --ready-timeout 300), not '$ready_timeout'"
fi
if [ -n "$port_override" ] && ! [[ "$port_override" =~ ^[0-9]+$ && "$port_override" -le 65535 ]]; then
  kg_die "--port takes a port number (0-65535), not '$port_override'"
fi
if [ -n "$backend_override" ] && ! [[ "$backend_override" =~ ^[a-z]+$ ]]; then
  kg_die "--backend takes a backend name (cuda, trt, eigen, sim), not '$backend_override'"
fi
if [ -n "${KG_CONFIG:-}" ]; then KG_CONFIG="$(cd "$(dirname "$KG_CONFIG")" && pwd)/$(basename "$KG_CONFIG")"; fi
kg_load_config

port="${port_override:-$KG_SERVER_PORT}"
host="${host_override:-$KG_SERVER_HOST}"
case "$host" in 0.0.0.0|"::"|"") host=127.0.0.1 ;; esac
backend="${backend_override:-$KG_ENGINE_BACKEND}"
# no indirect expansion (${!name}) of any text from the config: bash evaluates a subscript in such a name
# (`T[$(cmd)]`), so values are looked up by key, and the token's variable read with printenv
if [ -z "$ready_timeout" ]; then
  startup_s="$(kg_runtime_config get "engine.backends.$backend.startup_timeout_s" 2>/dev/null || echo 300)"
  ready_timeout=$(( $(printf '%.0f' "$startup_s") + 30 ))
fi
inputs_dir="$KG_REPO/assets/analysis/inputs"
outputs_dir="$KG_REPO/assets/analysis/outputs"
auth=()
if [ -n "$KG_SERVER_AUTH_TOKEN_ENV" ]; then
  [[ "$KG_SERVER_AUTH_TOKEN_ENV" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] \
    || kg_die "server.auth_token_env must name an environment variable, not '$KG_SERVER_AUTH_TOKEN_ENV'"
  token="$(printenv -- "$KG_SERVER_AUTH_TOKEN_ENV" || true)"
  [ -z "$token" ] || auth=(-H "Authorization: Bearer $token")
fi
command -v curl >/dev/null 2>&1 || kg_die "curl is needed (apt-get install curl)"

# ---------------------------------------------------------------- server: reuse or start (and stop on exit)
server_pid=""
server_log=""
base_url=""
stop_server() {
  [ -n "$server_pid" ] || return 0
  if kill -0 "$server_pid" 2>/dev/null; then
    kg_log "stopping the kgserve this script started (pid $server_pid)"
    kill -TERM "$server_pid" 2>/dev/null || true
    local waited=0 limit
    limit=$(( $(printf '%.0f' "$KG_SERVER_GRACE_PERIOD_S") + 5 ))
    while kill -0 "$server_pid" 2>/dev/null && [ "$waited" -lt $((limit * 5)) ]; do
      sleep 0.2; waited=$((waited + 1))
    done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

http_code() {  # URL -> prints the HTTP status (000: nothing answers)
  curl -s -o /dev/null -w '%{http_code}' --max-time 3 "${auth[@]}" "$1" 2>/dev/null || true
}

answering=""
if [ "$port" != 0 ]; then
  base_url="http://$host:$port"
  answering="$(http_code "$base_url/healthz")"
fi
if [ -n "$answering" ] && [ "$answering" != 000 ]; then
  kg_log "something already answers on $base_url (HTTP $answering on /healthz): using it; it was not started here and stays up"
else
  mkdir -p "$KG_PATHS_LOGS_DIR"
  server_log="$KG_PATHS_LOGS_DIR/serve_analysis-kgserve-$(date -u +%Y%m%dT%H%M%SZ)-$$.log"
  kg_log "starting kgserve (backend $backend, $host:$port): ${passthrough[*]:-no extra options}; log $server_log"
  PYTHONPATH="$KG_REPO${PYTHONPATH:+:$PYTHONPATH}" "$KG_PY" -m kgserve --config "$KG_CONFIG" "${passthrough[@]}" \
    >"$server_log" 2>&1 &
  server_pid=$!
fi

server_died() {
  kg_log "kgserve exited before it was ready; last lines of $server_log:"
  tail -n 20 "$server_log" >&2 || true
  server_pid=""
  exit 1
}

# progress: one updating line on a terminal, a line every 5 s otherwise
progress() {
  if [ -t 2 ]; then printf '\r%s\033[K' "$1" >&2; elif [ $(($2 % 5)) -eq 0 ]; then printf '%s\n' "$1" >&2; fi
}

start_s=$SECONDS
if [ -z "$base_url" ]; then  # --port 0: kgserve picks a port and logs it
  while :; do
    line="$(grep -m1 -o 'kgserve listening on http://[^ ]*' "$server_log" 2>/dev/null || true)"
    if [ -n "$line" ]; then base_url="${line#kgserve listening on }"; base_url="${base_url%/}"; break; fi
    kill -0 "$server_pid" 2>/dev/null || server_died
    [ $((SECONDS - start_s)) -lt "$ready_timeout" ] || kg_die "kgserve did not report its port within ${ready_timeout}s (log: $server_log)"
    sleep 0.5
  done
fi

kg_log "waiting for $base_url/readyz (timeout ${ready_timeout}s)"
while :; do
  elapsed=$((SECONDS - start_s))
  body="$(curl -s --max-time 3 "${auth[@]}" -w '\n%{http_code}' "$base_url/readyz" 2>/dev/null || true)"
  code="${body##*$'\n'}"
  [ "$code" = 200 ] && break
  if [ -n "$server_pid" ] && ! kill -0 "$server_pid" 2>/dev/null; then
    [ -t 2 ] && printf '\n' >&2
    server_died
  fi
  reason="$(printf '%s' "${body%$'\n'*}" | sed -n 's/.*"reason": *"\([^"]*\)".*/\1/p' | cut -c1-80)"
  progress "  not ready after ${elapsed}s (HTTP ${code:-000}${reason:+: $reason})" "$elapsed"
  if [ "$elapsed" -ge "$ready_timeout" ]; then
    [ -t 2 ] && printf '\n' >&2
    kg_die "$base_url/readyz not ready after ${ready_timeout}s${server_log:+ (log: $server_log)}; --ready-timeout S waits longer"
  fi
  sleep 1
done
[ -t 2 ] && printf '\r\033[K' >&2
kg_log "ready after $((SECONDS - start_s))s: $base_url"

# a server this script did not start must be the configured one: a simulated kgserve left on the port would
# otherwise answer for the real engine (its output written as if the engine's)
if [ -z "$server_pid" ]; then
  served="$(printf '%s' "${body%$'\n'*}" | "$KG_PY" -c '
import json, sys
try:
    doc = json.load(sys.stdin)
except ValueError:
    doc = {}
print(doc.get("backend"), "simulated" if doc.get("simulated") else "real", doc.get("model"), sep="\t")')"
  IFS=$'\t' read -r their_backend their_kind their_model <<<"$served"
  want_model="$(kg_runtime_config get "engine.backends.$backend.model" 2>/dev/null || true)"
  [ -n "$want_model" ] || want_model="$KG_ENGINE_MODEL"
  want_kind=real; [ "$backend" != sim ] || want_kind=simulated
  if [ "$their_backend" != "$backend" ] || [ "$their_kind" != "$want_kind" ] || [ "$their_model" != "$want_model" ]; then
    mismatch="the server already on $base_url serves $their_backend ($their_kind) with $their_model, not the configured $backend ($want_kind) with $want_model"
    [ "$use_running" -eq 1 ] || kg_die "$mismatch: stop it, pick another --port, or pass --use-running to use it anyway"
    kg_log "warning: $mismatch (--use-running: using it)"
  fi
fi

# ---------------------------------------------------------------- one analysis
resolve_input() {  # NAME -> prints a path, or fails
  local name="$1"
  if [[ "$name" == */* ]]; then
    [ -f "$name" ] && { printf '%s\n' "$name"; return 0; }
  else
    [ -f "$inputs_dir/$name" ] && { printf '%s\n' "$inputs_dir/$name"; return 0; }
    [ -f "$inputs_dir/$name.json" ] && { printf '%s\n' "$inputs_dir/$name.json"; return 0; }
  fi
  return 1
}

confirm_overwrite() {  # PATH
  [ "$assume_yes" -eq 1 ] && return 0
  local answer=""
  if [ -t 0 ]; then
    read -r -p "$1 exists; overwrite? [y/N] " answer || true
  elif { : </dev/tty; } 2>/dev/null; then
    read -r -p "$1 exists; overwrite? [y/N] " answer </dev/tty || true
  else
    kg_log "$1 exists and there is no terminal to ask: pass -y to overwrite or -o to write elsewhere"
    return 1
  fi
  [[ "$answer" == [yY]* ]]
}

analyse() {  # NAME -> 0 on HTTP 200
  local input output stem tmp code lines display
  if ! input="$(resolve_input "$1")"; then
    kg_log "no input '$1' in $inputs_dir (nor a file of that path)"
    return 1
  fi
  stem="$(basename "$input")"; stem="${stem%.*}"
  if [ -z "$output_opt" ]; then
    output="$outputs_dir/$stem.jsonl"
  elif [ -d "$output_opt" ]; then
    output="${output_opt%/}/$stem.jsonl"
  else
    output="$output_opt"
  fi
  if [ -e "$output" ] && ! confirm_overwrite "$output"; then
    kg_log "left $output as it was"
    return 1
  fi
  mkdir -p "$(dirname "$output")"
  tmp="$(mktemp "$(dirname "$output")/.serve_analysis.XXXXXX")"
  code="$(curl -sS -o "$tmp" -w '%{http_code}' --max-time "$(printf '%.0f' "$KG_LIMITS_DEADLINE_S")" "${auth[@]}" \
    -H 'Content-Type: application/json' --data-binary "@$input" "$base_url/analysis" || true)"
  if [ "$code" != 200 ]; then
    kg_log "HTTP ${code:-000} from $base_url/analysis for $input:"
    head -c 2000 "$tmp" >&2 || true
    rm -f "$tmp"
    return 1
  fi
  mv -f "$tmp" "$output"
  lines="$(wc -l <"$output" | tr -d ' ')"
  kg_log "wrote $lines line(s) to $output"
  display="${input#"$KG_REPO"/}"
  printf "same-node equivalent:\n  curl -sS -H 'Content-Type: application/json'%s --data-binary @%q %s > %q\n" \
    "${KG_SERVER_AUTH_TOKEN_ENV:+ -H \"Authorization: Bearer \$$KG_SERVER_AUTH_TOKEN_ENV\"}" \
    "$display" "$base_url/analysis" "${output#"$KG_REPO"/}"
}

if [ -n "$input_arg" ]; then
  analyse "$input_arg"
  exit $?
fi

while :; do
  printf '\ninputs in %s:\n' "${inputs_dir#"$KG_REPO"/}"
  (cd "$inputs_dir" && ls -1) | sed 's/^/  /'
  name=""
  if ! read -r -p "input basename (empty line to quit): " name; then
    printf '\n'
    break
  fi
  name="${name#"${name%%[![:space:]]*}"}"; name="${name%"${name##*[![:space:]]}"}"
  [ -n "$name" ] || break
  analyse "$name" || true
done
