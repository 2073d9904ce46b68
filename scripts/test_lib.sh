# Shared by the shell tests (sourced): `fail` with the logs of the test's folder, and a free port.
# The sourcing script sets `work` to its temporary folder first.

# fail MESSAGE: one line, then the tail of every log the test kept in $work; exit 1.
fail() {
  echo "FAIL: $*" >&2
  for log in "$work"/*.log "$work"/*.out "$work"/*.err; do
    [ -s "$log" ] && { echo "--- $log" >&2; tail -20 "$log" >&2; }
  done
  exit 1
}

# A port nothing listens on now (bash's /dev/tcp: a refused connect means free). Another process
# could take it before the caller binds it; the caller then fails or retries, loudly.
free_port() {
  local port
  for _ in $(seq 100); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  fail "no free port found"
}
