#!/usr/bin/env bash
# Integration test of dtsuite's Prometheus outputs against the real servers (ctest
# prometheus_integration_test, label integration): a Pushgateway and a Prometheus that scrapes it
# (with dashboards/dtsuite.rules.yml loaded), both on 127.0.0.1 with free ports and temp dirs.
#   scripts/prometheus_integration_test.sh DTSUITE RULES_FILE MPIEXEC [LAUNCHER FLAGS...]
# Checks: --push reaches Prometheus (one series per CSV record, the run's labels, the recording
# rules), --prom passes `promtool check metrics`, --metrics-port shows progress during a run, a
# gateway lost mid-run gives exit 2 with every CSV row kept, a hung run still pushes, bad
# --push/--metrics-port exit 2 at set-up (one line from dtsuite; the launcher may add its own).
# Exit 77 (ctest SKIP) when a server binary is missing.
set -euo pipefail
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

dtsuite=$1 rules=$2 mpiexec=$3
shift 3
launcher_flags=("$@")

for tool in prometheus prometheus-pushgateway promtool curl; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool not found (scripts/bootstrap.sh installs it)"
    exit 77
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/dtsuite_prom_it.XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT



# wait_ready URL SECONDS PID: until URL answers 200, or the server died, or time is up.
wait_ready() {
  local deadline=$((SECONDS + $2))
  while [ $SECONDS -lt $deadline ]; do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}

# start_pushgateway VAR: starts one, sets VAR to its port and records its pid in VAR_pid.
start_pushgateway() {
  local name=$1 port pid
  for _ in 1 2 3; do
    port=$(free_port)
    # Debian's gateway persists to a system-wide file by default: every earlier run would come back.
    prometheus-pushgateway --web.listen-address="127.0.0.1:$port" --persistence.file="$work/$name.persisted" \
      >"$work/$name.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    if wait_ready "http://127.0.0.1:$port/-/ready" 20 "$pid"; then
      printf -v "$name" '%s' "$port"
      printf -v "${name}_pid" '%s' "$pid"
      return
    fi
    kill "$pid" 2>/dev/null || true
  done
  fail "pushgateway did not start"
}

start_prometheus() {
  local gateway_port=$1 port pid
  cp "$rules" "$work/dtsuite.rules.yml"
  cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - dtsuite.rules.yml
scrape_configs:
  - job_name: pushgateway
    honor_labels: true   # keep the pushed job, host and run_id
    static_configs:
      - targets: ['127.0.0.1:$gateway_port']
EOF
  for _ in 1 2 3; do
    port=$(free_port)
    prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
      --web.listen-address="127.0.0.1:$port" >"$work/prometheus.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    if wait_ready "http://127.0.0.1:$port/-/ready" 60 "$pid"; then
      prometheus_port=$port
      return
    fi
    kill "$pid" 2>/dev/null || true
  done
  fail "prometheus did not start"
}

run_dtsuite() {  # run_dtsuite NAME ARGS...: stdout/stderr to $work/NAME.out/.err; sets rc
  local name=$1
  shift
  rc=0
  "$mpiexec" -np 2 "${launcher_flags[@]}" "$dtsuite" run "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
}

# The single value of an instant query that returns one sample ("" if none).
query_value() {
  curl -fsS -G --data-urlencode "query=$1" "http://127.0.0.1:$prometheus_port/api/v1/query" |
    sed -n 's/.*"value":\[[^,]*,"\([^"]*\)"\].*/\1/p'
}

# Polls an instant query until it returns one sample equal to $2, for up to $3 seconds.
wait_for_value() {
  local deadline=$((SECONDS + $3)) value=""
  while [ $SECONDS -lt $deadline ]; do
    value=$(query_value "$1")
    [ "$value" = "$2" ] && return 0
    sleep 0.5
  done
  fail "query $1: expected $2, got '${value}'"
}

start_pushgateway gateway
start_prometheus "$gateway"
echo "pushgateway on $gateway, prometheus on $prometheus_port"

# --- 1. push + textfile --------------------------------------------------------------------
# -o sum: Open MPI 4.1 drops NaN in min/max (README, overflow inputs), which this test is not about.
run_dtsuite push --quick -o sum --push "http://127.0.0.1:$gateway" --prom "$work/dtsuite.prom" --csv "$work/push.csv"
[ "$rc" -eq 0 ] || fail "dtsuite --push --prom exited $rc"
promtool check metrics <"$work/dtsuite.prom" || fail "promtool check metrics rejected the textfile"
echo "ok: promtool check metrics passes on the --prom textfile"

run_id=$(sed -n '2s/^[^,]*,\([^,]*\),.*/\1/p' "$work/push.csv")
[ -n "$run_id" ] || fail "no run id in the CSV"
# Every busbw record of the CSV is its own series in Prometheus: the labels tell them apart.
busbw_rows=$(grep -c ',busbw,' "$work/push.csv")
[ "$busbw_rows" -gt 0 ] || fail "no busbw rows in the CSV"
wait_for_value "count(dtsuite_busbw_bytes_per_second{quantile=\"0.5\",job=\"dtsuite\",run_id=\"$run_id\"})" \
  "$busbw_rows" 60
echo "ok: $busbw_rows busbw series of run $run_id in Prometheus, one per CSV row"
wait_for_value "count(dtsuite_build_info{run_id=\"$run_id\",backend=\"mpi\"})" 1 10
cases=$(sed -n 's/^# \([0-9]*\) cases;.*/\1/p' "$work/push.out")
wait_for_value "dtsuite_cases_done{run_id=\"$run_id\"} == dtsuite_cases_planned{run_id=\"$run_id\"}" "$cases" 10
wait_for_value "sum(dtsuite_cases_failed{run_id=\"$run_id\"})" 0 10
pass_rows=$(grep -c ',wrong,.*,pass,' "$work/push.csv" || true)
wait_for_value "count(dtsuite_verdict{run_id=\"$run_id\",metric=\"wrong\",verdict=\"pass\"})" "$pass_rows" 10
# The recording rules see the pushed series (one evaluation after the scrape).
wait_for_value "count(dtsuite:busbw_bytes_per_second:latest{host!=\"\"})" "$busbw_rows" 30
wait_for_value "count(dtsuite:verdict:latest{verdict=\"fail\"}) or vector(0)" 0 10
echo "ok: build info, progress, verdicts and the recording rules agree with the CSV"

# --- 2. /metrics during a run, and a gateway lost mid-run ------------------------------------
start_pushgateway doomed
metrics_port=$(free_port)
# A straggler (delay) stretches a few cases to several seconds: time to look at them live.
"$mpiexec" -np 2 "${launcher_flags[@]}" "$dtsuite" run --quick -o sum -d f32 --collective all_reduce \
  --backend 'faulty(delay(50),mpi)' --metrics-port "$metrics_port" --push "http://127.0.0.1:$doomed" \
  --csv "$work/live.csv" >"$work/live.out" 2>"$work/live.err" &
live=$!
pids+=("$live")
seen=""
deadline=$((SECONDS + 120))
while [ $SECONDS -lt $deadline ] && kill -0 "$live" 2>/dev/null; do
  page=$(curl -fsS "http://127.0.0.1:$metrics_port/metrics" 2>/dev/null || true)
  done_cases=$(sed -n 's/^dtsuite_cases_done \([0-9.e+]*\)$/\1/p' <<<"$page")
  planned=$(sed -n 's/^dtsuite_cases_planned \([0-9.e+]*\)$/\1/p' <<<"$page")
  if [ -n "$done_cases" ] && [ -n "$planned" ] && grep -q '^dtsuite_current_case_info{.*case="all_reduce/' <<<"$page" &&
     awk -v d="$done_cases" -v p="$planned" 'BEGIN { exit !(d >= 1 && d < p) }'; then
    seen="$done_cases of $planned"
    break
  fi
  sleep 0.2
done
[ -n "$seen" ] || fail "never saw progress on /metrics (cases done between 1 and planned, a current case)"
echo "ok: /metrics during the run: $seen cases done, current case shown"
kill "$doomed_pid"
wait "$doomed_pid" 2>/dev/null || true
rc=0
wait "$live" || rc=$?
[ "$rc" -eq 2 ] || fail "a run whose gateway went away exited $rc, expected 2"
grep -q "cannot push at the end to the Pushgateway" "$work/live.err" || fail "no push failure line on stderr"
[ "$(grep -c '^dtsuite:' "$work/live.err")" -eq 1 ] || fail "expected one line from dtsuite on stderr"
planned_live=$(sed -n 's/^# \([0-9]*\) cases;.*/\1/p' "$work/live.out")
rows=$(($(wc -l <"$work/live.csv") - 1))
[ "$rows" -ge "$planned_live" ] || fail "the CSV lost rows ($rows for $planned_live cases)"
echo "ok: gateway lost mid-run: exit 2, one line ($(grep dtsuite: "$work/live.err" | cut -c1-60)...), $rows CSV rows kept"

# --- 3. a hang: the watchdog's close still pushes (exit 3, the timeout verdict on the gateway) --
run_dtsuite hang --quick -o sum -d f32 --collective all_reduce --backend 'faulty(hang,mpi)' -T 3 \
  --push "http://127.0.0.1:$gateway" --csv "$work/hang.csv"
[ "$rc" -eq 3 ] || fail "a hung run exited $rc, expected 3"
hang_run=$(sed -n '2s/^[^,]*,\([^,]*\),.*/\1/p' "$work/hang.csv")
wait_for_value "count(dtsuite_verdict{run_id=\"$hang_run\",metric=\"check\",verdict=\"timeout\"})" 1 30
wait_for_value "dtsuite_cases_failed{run_id=\"$hang_run\"}" 1 10
echo "ok: a hung run pushes its timeout verdict before the job is aborted"

# --- 4. bad set-up: exit 2, one line, before any case -----------------------------------------
closed_port=$(free_port)
run_dtsuite nogateway --quick -o sum --push "http://127.0.0.1:$closed_port" --csv "$work/nogateway.csv"
[ "$rc" -eq 2 ] || fail "unreachable gateway exited $rc, expected 2"
[ "$(grep -c '^dtsuite:' "$work/nogateway.err")" -eq 1 ] || fail "unreachable gateway: expected one line from dtsuite"
run_dtsuite badurl --quick -o sum --push "ftp://127.0.0.1:$gateway" --csv "$work/badurl.csv"
[ "$rc" -eq 2 ] || fail "bad --push URL exited $rc, expected 2"
run_dtsuite busyport --quick -o sum --metrics-port "$gateway" --csv "$work/busyport.csv"
[ "$rc" -eq 2 ] || fail "--metrics-port on a busy port exited $rc, expected 2"
[ "$(grep -c '^dtsuite:' "$work/busyport.err")" -eq 1 ] || fail "busy port: expected one line from dtsuite"
echo "ok: unreachable gateway, bad URL, busy port: exit 2 with one line ($(grep '^dtsuite:' "$work/busyport.err" | cut -c1-70)...)"
echo "PASS"
