#!/bin/bash
# The fresh-machine check: on this Debian machine, remove the system packages svc's tests need
# (redis-server, PostgreSQL, Prometheus), then run exactly the README's two commands on a clean
# clone of HEAD, and nothing else:
#
#   npm ci && npm start     -> /healthcheck answers HTTP 200
#   npm test                -> provisions what is missing itself, ends "N passed, 0 failed, 0 skipped"
#
# It purges packages, so it runs only as root and only when asked:
#   SVC_FRESH_MACHINE_PURGE=1 bash scripts/fresh-machine-check.sh
# Output goes to stdout; the test log is left in $OUT (default a temp dir). Exit status: npm test's.
set -u
if [ "$(id -u)" != 0 ] || [ "${SVC_FRESH_MACHINE_PURGE:-}" != 1 ]; then
  echo "fresh-machine check: purges redis-server, postgresql and prometheus; run as root with SVC_FRESH_MACHINE_PURGE=1" >&2
  exit 2
fi
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
OUT=${OUT:-$(mktemp -d)}
echo "== removing the test programs"
DEBIAN_FRONTEND=noninteractive apt-get purge -y redis-server redis-tools 'postgresql*' prometheus >"$OUT/purge.log" 2>&1
apt-get autoremove -y >>"$OUT/purge.log" 2>&1
for p in redis-server prometheus promtool; do command -v "$p" >/dev/null && echo "still present: $p"; done
[ -d /usr/lib/postgresql ] && echo "still present: /usr/lib/postgresql"
dir=$(mktemp -d)
git clone -q "$repo" "$dir/c" && cd "$dir/c" || exit 1
echo "== clean clone of $(git log --oneline -1)"
echo "== npm ci"
npm ci >"$OUT/npm-ci.log" 2>&1 || { tail -20 "$OUT/npm-ci.log"; exit 1; }
echo "== npm start"
setsid npm start >"$OUT/start.log" 2>&1 &
starter=$!
for _ in $(seq 1 40); do
  code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' http://127.0.0.1:4000/healthcheck) && [ "$code" != 000 ] && break
  sleep 0.5
done
echo "GET /healthcheck: HTTP $code"
# Ctrl-C twice: the first signal drains, the second exits at once.
kill -INT -- -"$starter"; sleep 0.5; kill -INT -- -"$starter" 2>/dev/null; wait
echo "== npm test (log: $OUT/test.log)"
npm test >"$OUT/test.log" 2>&1
rc=$?
grep -m1 '^npm test: installing' "$OUT/test.log"
tail -1 "$OUT/test.log"
exit $rc
