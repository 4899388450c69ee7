#!/usr/bin/env bash
# Download the pinned KataGo release builds and the pinned network named in runtime/config.yaml (`release:`).
#
#   runtime/fetch_katago.sh [--config PATH] [--force] [TARGET...]      TARGET: cuda trt network (default: all)
#                                                                      or network:NAME (release.alternatives)
#
# Builds go to runtime/bin/<backend>/ (the zip, the AppImage extracted with --appimage-extract because
# containers have no FUSE, and a `katago` wrapper that engine.backends.<backend>.command points at);
# networks go to runtime/models/: `network` the pinned one, `network:NAME` an alternative the config names (the
# previous pin, say; serve it with engine.model: models/<its file>). Downloads resume (curl -C - / wget -c) and
# show progress. A published size is checked first; a pinned sha256 is verified; an unpinned one (KataGo publishes
# none for most files) is computed and written into the config file (commit it).
# Already-present, verified files are not downloaded again. Works inside and outside the enroot container.
# Compute nodes often have no internet: run this on the login node first; the job then finds the files.
set -euo pipefail
KG_SCRIPT=fetch_katago.sh
# shellcheck source=runtime/_common.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/_common.sh"

usage() { awk 'NR == 1 || /^#PBS/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"; }

force=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) KG_CONFIG="$2"; shift 2 ;;
    --config=*) KG_CONFIG="${1#*=}"; shift ;;
    --force) force=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; kg_die "unknown option $1" ;;
    *) targets+=("$1"); shift ;;
  esac
done
kg_load_config
[ -n "${KG_RELEASE_VERSION:-}" ] || kg_die "$KG_CONFIG has no release: section"

backends=()
for name in cuda trt eigen; do
  var="KG_RELEASE_ASSETS_${name^^}"
  [ -n "${!var:-}" ] && backends+=("$name")
done
if [ ${#targets[@]} -eq 0 ]; then
  targets=("${backends[@]}" network)
fi

# --- download with resume and progress; clear message when offline --------------------------------------
download() {  # URL DEST
  local url="$1" dest="$2" part="$2.part" status=0 host
  host="$(printf '%s' "$url" | sed -E 's#^[a-z]+://([^/]+).*#\1#')"
  mkdir -p "$(dirname "$dest")"
  kg_log "downloading $url"
  kg_log "        -> $dest (resumes from $(basename "$part") if present)"
  if command -v curl >/dev/null 2>&1; then
    curl -fL --retry 3 --retry-delay 2 --connect-timeout 20 -C - --progress-bar -o "$part" "$url" || status=$?
    case "$status" in
      0) ;;
      5|6|7|28|35|56) offline "$host" "curl exit $status" ;;
      33) rm -f "$part"; kg_die "the server cannot resume $(basename "$part"); removed it, run again" ;;
      *) kg_die "download of $url failed (curl exit $status)" ;;
    esac
  elif command -v wget >/dev/null 2>&1; then
    wget -c --tries=3 --timeout=20 --progress=bar:force -O "$part" "$url" || status=$?
    case "$status" in
      0) ;;
      4) offline "$host" "wget exit 4: network failure" ;;
      *) kg_die "download of $url failed (wget exit $status)" ;;
    esac
  else
    kg_die "neither curl nor wget is installed"
  fi
  mv -f "$part" "$dest"
}

offline() {  # HOST DETAIL
  kg_die "cannot reach $1 ($2): this machine looks offline.
  Run runtime/fetch_katago.sh where there is internet (the login node): files land in runtime/bin and runtime/models
  on the shared file system, and later runs (and runtime/enroot_create.pbs) skip what is already there.
  A partial download is kept as *.part and resumes next time."
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# verify DEST KEY PINNED SIZE: size check, kind check, then sha256 against the pin, or record it in the config file.
verify() {
  local dest="$1" key="$2" pinned="$3" size="${4:-}" actual_size digest
  if [ -n "$size" ]; then
    actual_size="$(wc -c <"$dest" | tr -d ' ')"
    if [ "$actual_size" != "$size" ]; then
      mv -f "$dest" "$dest.bad"
      kg_die "$(basename "$dest") has $actual_size bytes, the published size is $size; moved it to $dest.bad"
    fi
  fi
  check_kind "$dest"
  kg_log "sha256 $(basename "$dest") ..."
  digest="$(sha256_of "$dest")"
  if [ -n "$pinned" ]; then
    if [ "$digest" != "$pinned" ]; then
      mv -f "$dest" "$dest.bad"
      kg_die "sha256 mismatch for $(basename "$dest"): got $digest, pinned $pinned ($key in $KG_CONFIG);
  moved it to $dest.bad. Re-pin only if the upstream file really changed (see docs/runbook.md, Re-pinning KataGo)."
    fi
    kg_log "sha256 ok ($digest)"
  else
    kg_runtime_config pin "$key" "$digest"
    kg_log "sha256 recorded: $key = $digest in $KG_CONFIG (commit it to pin this file)"
  fi
}

# check_kind DEST: a zip must start as a zip, a .gz as gzip: an HTML page (a captive portal, an error page) is
# refused before any sha256 is pinned, so the real file is not refused for good later
check_kind() {
  local dest="$1" want magic head
  case "$dest" in
    *.zip) want=zip; magic=504b0304 ;;
    *.gz) want=gzip; magic=1f8b ;;
    *) return 0 ;;
  esac
  head="$(od -An -tx1 -N4 "$dest" | tr -d ' \n')"
  if [ "${head:0:${#magic}}" != "$magic" ]; then
    mv -f "$dest" "$dest.bad"
    kg_die "$(basename "$dest") is not a $want file (it starts with bytes $head$(head -c 16 "$dest.bad" | tr -c '[:print:]' '.' | sed 's/^/: "/; s/$/"/')): a login page or an error page instead of the download?
  moved it to $dest.bad; nothing pinned"
  fi
}

# plain_name VALUE WHAT: a name from the config is a file name, never a path out of its folder
plain_name() {
  case "$1" in
    ""|.|..|*/*) kg_die "$2 '$1' in $KG_CONFIG is not a plain file name (no '/', not '.' or '..')" ;;
  esac
}

fetch_file() {  # URL DEST KEY PINNED [SIZE]
  local url="$1" dest="$2" key="$3" pinned="$4" size="${5:-}"
  if [ -f "$dest" ] && [ "$force" -eq 0 ]; then
    kg_log "present: $dest"
  else
    rm -f "$dest"
    download "$url" "$dest"
  fi
  verify "$dest" "$key" "$pinned" "$size"
}

# --- release builds: zip -> AppImage -> extracted tree + wrapper ------------------------------------------
unzip_to() {  # ZIP DIR
  if command -v unzip >/dev/null 2>&1; then
    unzip -q -o "$1" -d "$2"
  else
    "$KG_PY" -m zipfile -e "$1" "$2"
  fi
}

write_wrapper() {  # DIR
  cat >"$1/katago" <<'WRAPPER'
#!/usr/bin/env bash
# Generated by runtime/fetch_katago.sh: runs KataGo from its extracted AppImage (no FUSE needed).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/squashfs-root"
if [ -x "$root/AppRun" ]; then
  exec "$root/AppRun" "$@"
fi
export LD_LIBRARY_PATH="$root/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$root/usr/bin/katago" "$@"
WRAPPER
  chmod +x "$1/katago"
}

fetch_backend() {  # BACKEND
  local backend="$1" asset_var="KG_RELEASE_ASSETS_${1^^}" url_var="KG_RELEASE_URL_${1^^}" sha_var="KG_RELEASE_SHA256_${1^^}"
  local asset="${!asset_var:-}" dir="$KG_PATHS_BIN_DIR/$1" stamp unpack appimage
  [ -n "$asset" ] || kg_die "no release.assets.$backend in $KG_CONFIG"
  plain_name "$asset" "release.assets.$backend"
  fetch_file "${!url_var}" "$dir/$asset" "release.sha256.$backend" "${!sha_var:-}"
  stamp="$dir/.extracted"
  if [ "$force" -eq 0 ] && [ -x "$dir/katago" ] && [ -d "$dir/squashfs-root" ] \
      && [ "$(cat "$stamp" 2>/dev/null)" = "$asset" ]; then
    kg_log "extracted already: $dir/squashfs-root ($asset)"
    return 0
  fi
  kg_log "extracting $asset"
  unpack="$dir/.unpack"
  rm -rf "$unpack" "$dir/squashfs-root"
  mkdir -p "$unpack"
  unzip_to "$dir/$asset" "$unpack"
  appimage="$(find "$unpack" -type f -name katago | head -n 1)"
  [ -n "$appimage" ] || kg_die "$asset holds no 'katago' executable"
  mv -f "$appimage" "$dir/katago.AppImage"
  chmod +x "$dir/katago.AppImage"
  mkdir -p "$dir/configs"
  find "$unpack" -type f -name '*.cfg' -exec mv -f {} "$dir/configs/" \;
  rm -rf "$unpack"
  (cd "$dir" && ./katago.AppImage --appimage-extract >/dev/null) \
    || kg_die "$dir/katago.AppImage --appimage-extract failed"
  [ -d "$dir/squashfs-root" ] || kg_die "--appimage-extract made no squashfs-root in $dir"
  write_wrapper "$dir"
  printf '%s\n' "$asset" >"$stamp"
  kg_log "ready: $dir/katago (KataGo $KG_RELEASE_VERSION, $backend)"
}

describe_network() {  # PATH: layout, weights and FLOPs per evaluation, and whether kgbench.nets synth knows the layout
  if "$KG_PY" -c 'import kgbench.nets' >/dev/null 2>&1; then
    "$KG_PY" -m kgbench.nets flops "$1" >&2 \
      || kg_log "warning: could not describe $1 (python -m kgbench.nets flops): not a KataGo network this project reads"
  else
    kg_log "note: kgbench is not installed here; describe the network with: python -m kgbench.nets flops $1"
  fi
}

fetch_network() {
  fetch_file "$KG_RELEASE_NETWORK_URL" "$KG_RELEASE_NETWORK_PATH" release.network.sha256 \
    "${KG_RELEASE_NETWORK_SHA256:-}" "${KG_RELEASE_NETWORK_SIZE_BYTES:-}"
  describe_network "$KG_RELEASE_NETWORK_PATH"
  if [ "$KG_ENGINE_MODEL" != "$KG_RELEASE_NETWORK_PATH" ]; then
    kg_log "note: engine.model is $KG_ENGINE_MODEL, not the pinned network $KG_RELEASE_NETWORK_PATH"
  fi
}

fetch_alternative() {  # NAME: release.alternatives.NAME
  local key="release.alternatives.$1" url path
  url="$(kg_runtime_config get "$key.url" 2>/dev/null)" \
    || kg_die "no network '$1' under release.alternatives in $KG_CONFIG (have: $(alternatives))"
  path="$(kg_runtime_config get "$key.path")"
  fetch_file "$url" "$path" "$key.sha256" "$(kg_runtime_config get "$key.sha256")" \
    "$(kg_runtime_config get "$key.size_bytes")"
  describe_network "$path"
  kg_log "alternative network $1 at $path: serve it with engine.model: models/$(basename "$path")"
}

alternatives() {
  { kg_runtime_config get release.alternatives 2>/dev/null || echo '{}'; } \
    | "$KG_PY" -c 'import json, sys; print(" ".join(json.load(sys.stdin)) or "none")'
}

for target in "${targets[@]}"; do
  case "$target" in
    network) fetch_network ;;
    network:*) fetch_alternative "${target#network:}" ;;
    cuda|trt|eigen) fetch_backend "$target" ;;
    *) kg_die "unknown target '$target' (expected: ${backends[*]} network network:NAME)" ;;
  esac
done
kg_log "done: ${targets[*]}"
