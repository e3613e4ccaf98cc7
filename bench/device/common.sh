# Shell helpers shared by the device scripts (run-all.sh, ops_check.sh); sourced, not run.

# wait_for FILE SECONDS PID: until FILE exists and is not empty, SECONDS pass, or process PID
# is gone; true when FILE came (a load's "ready" file).
wait_for() {
  local i=0
  while [ ! -s "$1" ] && ((i < $2 * 5)) && kill -0 "$3" 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
  [ -s "$1" ]
}
