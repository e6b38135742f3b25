#!/usr/bin/env bash
# The whole suite N times in a row (issue 14: "green every time on a loaded machine").
# Usage: bench/suite_soak.sh [N]   (DATABASE_URL and REDIS_URL as for `make test`)
# Writes var/soak/run<i>.log and appends one line per run, with the load average at its start
# and end, to var/soak/summary.log. Exits non-zero if any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
mkdir -p var/soak
failed=0
for i in $(seq "$runs"); do
  start=$(date +%s)
  load_before=$(cut -d' ' -f1 /proc/loadavg)
  .venv/bin/python -m chatsite.server.process.embedded .venv/bin/python -m pytest -q -p no:cacheprovider \
    > "var/soak/run$i.log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || failed=1
  echo "run $i rc=$rc $(( $(date +%s) - start ))s load ${load_before}->$(cut -d' ' -f1 /proc/loadavg)" \
    "$(tail -n 1 "var/soak/run$i.log")" | tee -a var/soak/summary.log
done
exit "$failed"
