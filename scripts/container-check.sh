#!/usr/bin/env bash
# Builds the image from the repository's Dockerfile with Debian's podman and checks it runs: it
# starts, answers a call through a local anvil, reports healthy through its own HEALTHCHECK (on a
# non-default port, so the probe must follow the config), and drains on SIGTERM. No registry is
# needed: the Dockerfile's base `node:20-bookworm-slim` is made here with mmdebstrap (Debian
# bookworm, minbase) plus this machine's Node 20, npm, CA bundle and the `node` user (uid 1000),
# and imported under that name. Needs root, podman, runc and mmdebstrap (apt-get install podman runc
# mmdebstrap uidmap); the npm registry must be reachable (the Dockerfile runs npm ci).
# Usage: bash scripts/container-check.sh      (docs/operations.md "Deploying")
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'podman rm -f svc-check >/dev/null 2>&1 || true; kill "${anvil_pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
# This machine's kernel mounts cgroups v1 and v2 side by side and forbids raising rlimits: runc
# with cgroupfs, and no default ulimits.
export CONTAINERS_CONF="$work/containers.conf"
printf '[containers]\ndefault_ulimits = []\npids_limit = 0\n[engine]\ncgroup_manager = "cgroupfs"\nruntime = "runc"\n' >"$CONTAINERS_CONF"

base=docker.io/library/node:20-bookworm-slim
# This machine's CA bundle: the npm registry may be reached through a TLS-inspecting egress proxy
# whose CA only the host trusts (the Dockerfile's npm ci runs inside the image).
ca=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
if ! podman image exists "$base"; then
  echo "== base image $base from Debian bookworm (mmdebstrap) and this machine's node $(node --version)"
  npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
  mmdebstrap --variant=minbase --include=ca-certificates,libstdc++6 \
    --customize-hook="copy-in $(readlink -f "$(command -v node)") /usr/bin" \
    --customize-hook='mkdir -p "$1/usr/lib/node_modules/npm"' \
    --customize-hook="sync-in $npm_dir /usr/lib/node_modules/npm" \
    --customize-hook='chroot "$1" ln -sf ../lib/node_modules/npm/bin/npm-cli.js /usr/bin/npm' \
    --customize-hook='chroot "$1" ln -sf ../lib/node_modules/npm/bin/npx-cli.js /usr/bin/npx' \
    --customize-hook='chroot "$1" useradd --uid 1000 --create-home --shell /bin/sh node' \
    --customize-hook="upload $ca /etc/ssl/certs/ca-certificates.crt" \
    bookworm "$work/base.tar"
  podman import --change "ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt" "$work/base.tar" "$base"
fi

echo "== podman build (docker format: OCI images drop HEALTHCHECK)"
podman build --format docker --pull=never --network=host -t localhost/svc:check .

echo "== run it against a local anvil, on port 4100 (not the default 4000)"
./node_modules/.bin/anvil --port 8645 --silent &
anvil_pid=$!
cat >"$work/svc.yaml" <<'YAML'
server:
  httpPort: 4100
  waitBeforeShutdown: 2s
  waitAfterShutdown: 2s
metrics:
  port: 4101
projects:
  - id: main
    upstreams:
      - { id: anvil, endpoint: "http://127.0.0.1:8645", evm: { chainId: 31337 } }
YAML
chmod 644 "$work/svc.yaml"
podman run -d --name svc-check --network=host -v "$work/svc.yaml:/etc/svc/svc.yaml:ro" localhost/svc:check >/dev/null
for _ in $(seq 1 60); do
  if out=$(curl -sf -X POST http://127.0.0.1:4100/main/evm/31337 -H 'content-type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}'); then break; fi
  sleep 0.5
done
echo "answer: ${out:-none}"
[[ "${out:-}" == *'"result":"0x7a69"'* ]] || { podman logs svc-check; echo "FAIL: no answer"; exit 1; }

echo "== its HEALTHCHECK (svc healthcheck --config /etc/svc/svc.yaml: port 4100 from the config)"
podman healthcheck run svc-check && echo "healthy"
[[ "$(podman inspect --format '{{.State.Health.Status}}' svc-check)" == healthy ]] || { echo "FAIL: not healthy"; exit 1; }

echo "== SIGTERM drains: /healthcheck 503 during waitBeforeShutdown, calls still served, then exit 0"
podman kill --signal TERM svc-check >/dev/null
sleep 0.5
status=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:4100/healthcheck || true)
call=$(curl -s -X POST http://127.0.0.1:4100/main/evm/31337 -H 'content-type: application/json' -d '{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}' || true)
echo "while draining: healthcheck $status, call $call"
[[ "$status" == 503 && "$call" == *'"result":"0x7a69"'* ]] || { echo "FAIL: drain"; exit 1; }
code=$(podman wait svc-check)
echo "exit code $code"
[[ "$code" == 0 ]] || { podman logs svc-check | tail -20; echo "FAIL: exit $code"; exit 1; }
echo "OK: the image builds, serves, reports healthy on its configured port and drains on SIGTERM"
