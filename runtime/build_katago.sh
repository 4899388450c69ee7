#!/usr/bin/env bash
# Build KataGo's CUDA backend from a source tarball, for a GPU node where the release binary will not do (no
# internet to fetch it, another CUDA, a version to qualify before pinning it).
#
#   runtime/build_katago.sh SOURCE_TARBALL [OUT_DIR] [--arch SM] [--jobs N]
#
# SOURCE_TARBALL: KataGo's `cpp/` tree as .tar.gz (e.g. katago-v1.17.2-cpp-src.tar.gz). OUT_DIR (default
# runtime/bin/cuda-src) gets `katago.bin` (the binary) and `katago` (a wrapper that sets LD_LIBRARY_PATH to cuDNN and
# execs it): point engine.backends.cuda.command (or kgbench's engine.binary=) at OUT_DIR/katago.
# Needs nvcc (CUDA >= 12), CMake >= 3.18, a C++17 compiler, zlib headers, and cuDNN 9: either where CMake finds it,
# or the `nvidia-cudnn-cu12`/`-cu13` pip package importable by python3 (headers and libcudnn under site-packages).
# --arch: the CUDA architectures to compile for (default: the first GPU's compute capability from nvidia-smi, else
# 90 = Hopper); KataGo's own CMakeLists names ~12 of them, which takes ~5x longer to build.
set -euo pipefail
KG_SCRIPT=build_katago.sh
kg_log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
kg_die() { printf '%s: error: %s\n' "$KG_SCRIPT" "$*" >&2; exit 1; }
usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source_tarball="" out_dir="" arch="" jobs="$(nproc 2>/dev/null || echo 4)"
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; kg_die "unknown option $1" ;;
    *) if [ -z "$source_tarball" ]; then source_tarball="$1"; elif [ -z "$out_dir" ]; then out_dir="$1";
       else kg_die "too many arguments: $1"; fi; shift ;;
  esac
done
[ -n "$source_tarball" ] || { usage >&2; kg_die "no SOURCE_TARBALL given"; }
[ -f "$source_tarball" ] || kg_die "no source tarball at $source_tarball"
out_dir="${out_dir:-$repo/runtime/bin/cuda-src}"
command -v nvcc >/dev/null 2>&1 || kg_die "nvcc not found: this builds KataGo's CUDA backend and needs the CUDA toolkit"
command -v cmake >/dev/null 2>&1 || kg_die "cmake not found"

if [ -z "$arch" ]; then
  arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')" || true
  arch="${arch:-90}"
fi

# cuDNN: CMake's own search first; else the pip package's folder
cudnn_args=()
cudnn_lib_dir=""
cudnn_root="$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null || true)"
if [ -n "$cudnn_root" ] && [ -f "$cudnn_root/include/cudnn.h" ]; then
  cudnn_lib="$(find "$cudnn_root/lib" -maxdepth 1 -name 'libcudnn.so*' | sort | head -1)"
  [ -n "$cudnn_lib" ] || kg_die "no libcudnn.so under $cudnn_root/lib"
  cudnn_args=(-DCUDNN_INCLUDE_DIR="$cudnn_root/include" -DCUDNN_LIBRARY="$cudnn_lib")
  cudnn_lib_dir="$cudnn_root/lib"
  kg_log "cuDNN from the pip package at $cudnn_root"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/katago-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
tar -xzf "$source_tarball" -C "$work"
src="$(dirname "$(find "$work" -maxdepth 3 -name CMakeLists.txt -path '*cpp/CMakeLists.txt' | head -1)")"
[ -d "$src" ] || kg_die "$source_tarball holds no cpp/CMakeLists.txt"
# KataGo's CMakeLists sets its architecture list unconditionally: narrow it to the one asked for
sed -i -E "s/set\(CMAKE_CUDA_ARCHITECTURES [0-9 ]+\)/set(CMAKE_CUDA_ARCHITECTURES $arch)/" "$src/CMakeLists.txt"

kg_log "building KataGo (CUDA backend, sm_$arch, $jobs jobs) from $(basename "$source_tarball")"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
started=$SECONDS
cmake -S "$src" -B "$work/build" "${generator[@]}" -DUSE_BACKEND=CUDA -DCMAKE_BUILD_TYPE=Release \
  -DNO_GIT_REVISION=1 "${cudnn_args[@]}" >"$work/cmake.log" 2>&1 || { tail -30 "$work/cmake.log" >&2; kg_die "cmake failed"; }
cmake --build "$work/build" --target katago -j "$jobs" >"$work/build.log" 2>&1 \
  || { tail -40 "$work/build.log" >&2; kg_die "the build failed"; }

mkdir -p "$out_dir"
install -m 755 "$work/build/katago" "$out_dir/katago.bin"
cat >"$out_dir/katago" <<WRAPPER
#!/usr/bin/env bash
# KataGo's CUDA backend built by runtime/build_katago.sh; cuDNN's folder on the library path
export LD_LIBRARY_PATH="${cudnn_lib_dir}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "\$(dirname "\${BASH_SOURCE[0]}")/katago.bin" "\$@"
WRAPPER
chmod 755 "$out_dir/katago"
kg_log "built in $((SECONDS - started)) s: $out_dir/katago ($("$out_dir/katago" version 2>/dev/null | head -1 || echo 'version: not runnable here'))"
