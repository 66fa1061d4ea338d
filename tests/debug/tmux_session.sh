# Sourced by the tmux tests of tpusim debug (terminal.sh, interrupt.sh): starts COMMAND in a
# detached 132 x 50 tmux session of its own (killed on exit) and gives the test
#   t ARGS...        tmux on that session's server
#   screen           the pane's last 200 lines
#   wait_for REGEX   waits until a screen line matches (grep -E), at most $wait_seconds (default
#                    20) seconds; else prints the screen and exits 1
#   count REGEX      the number of screen lines that match
# Exits 77 (CTest: skipped) when tmux is not installed.
#   tmux_session NAME COMMAND
tmux_session() {
  if ! command -v tmux >/dev/null; then
    echo "tmux is not installed: skipped (scripts/install-deps.sh installs it)"
    exit 77
  fi
  sock="tpusim-$1-$$"
  trap 't kill-server 2>/dev/null' EXIT
  export TERM=xterm
  t new-session -d -x 132 -y 50 "$2"
}
t() { tmux -L "$sock" -f /dev/null "$@"; }
screen() { t capture-pane -p -S -200; }
wait_for() {
  for _ in $(seq $((${wait_seconds:-20} * 10))); do
    if screen | grep -Eq -- "$1"; then return 0; fi
    sleep 0.1
  done
  echo "FAIL: the screen never showed: $1"
  echo "----- screen -----"
  screen
  exit 1
}
count() { screen | grep -Ec -- "$1"; }
