# Helpers sourced by the scripts in this folder (not run on its own).
# Sets ROOT (the repository root) and JOBS; defines step timing, a summary printed at exit, and
# configure_and_build.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
SUMMARY=()
CURRENT_STEP=
STEP_START=0
SCRIPT_START=$SECONDS
if [[ -t 1 ]]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD= PLAIN=; fi

# step NAME: starts a timed step (ends the previous one as passed).
step() {
  step_done
  CURRENT_STEP=$1
  STEP_START=$SECONDS
  printf '\n%s==> %s%s\n' "$BOLD" "$1" "$PLAIN"
}

# step_done [NOTE]: ends the current step as passed.
step_done() {
  if [[ -n $CURRENT_STEP ]]; then
    SUMMARY+=("$(printf '  ok    %-56s %4ds  %s' "$CURRENT_STEP" $((SECONDS - STEP_START)) "${1:-}")")
    CURRENT_STEP=
  fi
}

# step_fail [NOTE]: ends the current step as failed (the script goes on).
step_fail() {
  if [[ -n $CURRENT_STEP ]]; then
    SUMMARY+=("$(printf '  FAIL  %-56s %4ds  %s' "$CURRENT_STEP" $((SECONDS - STEP_START)) "${1:-}")")
    CURRENT_STEP=
  fi
}

# print_summary TITLE EXIT_CODE: the table of steps; the running step failed when EXIT_CODE != 0.
print_summary() {
  local title=$1 rc=$2
  if [[ -n $CURRENT_STEP ]]; then
    if ((rc == 0)); then
      step_done
    else
      SUMMARY+=("$(printf '  FAIL  %-56s %4ds' "$CURRENT_STEP" $((SECONDS - STEP_START)))")
    fi
  fi
  printf '\n%s==== %s: %s (%ds) ====%s\n' "$BOLD" "$title" "$( ((rc == 0)) && echo PASSED || echo FAILED)" \
    $((SECONDS - SCRIPT_START)) "$PLAIN"
  printf '%s\n' "${SUMMARY[@]}"
}

# configure_and_build DIR BUILD_TYPE [CMAKE_ARGS...] [-- TARGETS...]
# Configures DIR with Ninja only when it has no cache yet or the arguments changed since the last
# configure (Ninja re-runs CMake by itself when a CMakeLists.txt changes), then builds.
configure_and_build() {
  local dir=$1 type=$2
  shift 2
  local args=() targets=()
  while (($#)); do
    if [[ $1 == -- ]]; then
      shift
      targets=("$@")
      break
    fi
    args+=("$1")
    shift
  done
  args=(-DCMAKE_BUILD_TYPE="$type" "${args[@]}")
  # A compiler cache when one is installed (Debian's ccache; optional): rebuilds of a clean clone,
  # another worktree or the other build folder reuse objects. CCACHE_BASEDIR makes the cached
  # paths relative to the repository root, so any clone location hits.
  if command -v ccache >/dev/null && [[ -z ${CMAKE_CXX_COMPILER_LAUNCHER:-} ]]; then
    args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  fi
  local stamp="$ROOT/$dir/.tpusim-configure-args"
  if [[ ! -f $ROOT/$dir/CMakeCache.txt ]]; then
    cmake -S "$ROOT" -B "$ROOT/$dir" -G Ninja "${args[@]}"
  elif [[ ! -f $stamp || $(<"$stamp") != "${args[*]}" ]]; then
    cmake -S "$ROOT" -B "$ROOT/$dir" "${args[@]}"
  fi
  printf '%s' "${args[*]}" >"$stamp"
  if ((${#targets[@]})); then
    cmake --build "$ROOT/$dir" -j "$JOBS" --target "${targets[@]}"
  else
    cmake --build "$ROOT/$dir" -j "$JOBS"
  fi
}
