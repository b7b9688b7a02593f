#!/bin/sh
# deploy.sh - offline validation of deploy/: every kustomize overlay renders
# (kubectl kustomize) and every rendered object validates against the
# Kubernetes schemas (npm kubernetes-models, deploy/kubernetes/validate.js);
# the lockd.conf files lockd would read are accepted by `lockd --check-config`;
# the systemd unit passes `systemd-analyze verify`; the Dockerfile builds the
# way a developer does and ships every shared library lockd and lockctl need.
set -eu
. "$(dirname "$0")/lib/common.sh"

k8s=$REPO/deploy/kubernetes
d=$T_TMP

# ---- Kubernetes
if ! command -v kubectl >/dev/null 2>&1; then
    t_not_ok "kubectl is installed (needed to render deploy/kubernetes)"
fi
if [ ! -d "$REPO/node_modules/kubernetes-models" ] || [ ! -d "$REPO/node_modules/yaml" ]; then
    (cd "$REPO" && npm install --no-audit --no-fund --silent) >/dev/null 2>&1 || true
fi
check_lockd_conf() {
    # The ConfigMap's lockd.conf, as lockd would read it.
    node -e '
        const Y = require("yaml");
        const docs = Y.parseAllDocuments(require("fs").readFileSync(0, "utf8")).map((x) => x.toJS());
        const cm = docs.find((o) => o && o.kind === "ConfigMap" && o.metadata.name.startsWith("lockd-config"));
        process.stdout.write(cm.data["lockd.conf"]);' <"$1" >"$1.raw" &&
        # The token file is a mounted Secret in the pod: here a stand-in
        # (--check-config opens every file startup opens).
        printf '%s\n' 0123456789abcdef0123456789abcdef >"$d/tokens" &&
        sed "s#/etc/lockd/auth/tokens#$d/tokens#" "$1.raw" >"$1.conf" &&
        env -u LOCKD_BIN -u LOCKD_URL "$LOCKD_BIN" --config "$1.conf" --check-config >/dev/null
}
if command -v kubectl >/dev/null 2>&1; then
    for dir in . overlays/sidecar overlays/native-sidecar overlays/redlock overlays/sentinel overlays/cluster; do
        out=$d/render-$(echo "$dir" | tr ./ _-).yaml
        t_check "kubectl kustomize deploy/kubernetes/$dir renders" \
            sh -c 'kubectl kustomize "$0" >"$1" 2>"$1.err"' "$k8s/$dir" "$out"
        t_check "deploy/kubernetes/$dir: objects valid against Kubernetes schemas and hardened" \
            sh -c 'cd "$0" && node deploy/kubernetes/validate.js "$1"' "$REPO" "$out"
        t_check "deploy/kubernetes/$dir: lockd accepts its lockd.conf" check_lockd_conf "$out"
    done
    ns=$d/render-overlays-native-sidecar.yaml
    t_check "native-sidecar: lockd is an initContainer with restartPolicy Always" node -e '
        const Y = require(process.argv[1] + "/node_modules/yaml");
        const o = Y.parseAllDocuments(require("fs").readFileSync(process.argv[2], "utf8"))
            .map((x) => x.toJS()).find((o) => o.kind === "Deployment" && o.metadata.name === "app");
        const s = o.spec.template.spec;
        const ic = (s.initContainers || []).find((c) => c.name === "lockd");
        if (!ic || ic.restartPolicy !== "Always" || !ic.startupProbe || s.containers.some((c) => c.name === "lockd"))
            process.exit(1);' "$REPO" "$ns"
    rl=$d/render-overlays-redlock.yaml
    t_check "redlock: three Redis Deployments and Services, lockd pointed at all three" sh -c '
        [ "$(grep -cE "^  name: lockd-redis-[012]$" "$0")" -eq 6 ] &&
        grep -q "redis redis://lockd-redis-0:6379,redis://lockd-redis-1:6379,redis://lockd-redis-2:6379" "$0"' "$rl"
    sn=$d/render-overlays-sentinel.yaml
    t_check "sentinel: a primary, a replica of it, three sentinels; lockd asks them for 'lockd'" sh -c '
        grep -A1 -- "- --replicaof" "$0" | grep -q "lockd-redis$" && grep -q "sentinel monitor lockd lockd-redis 6379 2" "$0" &&
        grep -q "redis redis://lockd-sentinel:26379" "$0" && grep -q "redis_master_name lockd" "$0"' "$sn"
    cl=$d/render-overlays-cluster.yaml
    t_check "cluster: three cluster-enabled primaries without full coverage, a create Job, lockd on backend cluster" sh -c '
        grep -q "replicas: 3" "$0" && grep -q -- "--cluster-require-full-coverage" "$0" &&
        grep -q "redis-cli --cluster create" "$0" && grep -q "backend cluster" "$0" &&
        grep -q "redis redis://lockd-redis-cluster-0.lockd-redis-cluster:6379" "$0"' "$cl"
    t_check "a broken manifest is rejected by the validator" sh -c '
        sed "s/containerPort: 8080/containerPort: \"http\"/" "$0" | node "$1/deploy/kubernetes/validate.js" >/dev/null 2>&1 && exit 1; exit 0' \
        "$d/render-_.yaml" "$REPO"
fi

# ---- systemd
unit=$REPO/deploy/systemd/lockd.service
# Same unit, ExecStart pointed at the lockd under test (verify checks the binary exists).
sed "s|/usr/local/bin/lockd|$LOCKD_BIN|" "$unit" >"$d/lockd.service"
t_check "systemd-analyze verify lockd.service" \
    sh -c 'systemd-analyze verify "$0" >"$0.out" 2>&1 && ! grep -q . "$0.out" || { cat "$0.out"; exit 1; }' "$d/lockd.service"
for key in DynamicUser=yes ProtectSystem=strict NoNewPrivileges=yes TimeoutStopSec=30s; do
    t_check "lockd.service sets $key" grep -qx "$key" "$unit"
done
t_check "lockd accepts deploy/systemd/lockd.conf" \
    env -u LOCKD_BIN -u LOCKD_URL "$LOCKD_BIN" --config "$REPO/deploy/systemd/lockd.conf" --check-config >/dev/null

# ---- Dockerfile (no Docker engine here: static checks)
df=$REPO/deploy/docker/Dockerfile
t_check "Dockerfile: both stages on debian:bookworm-slim" sh -c '[ "$(grep -c "^FROM debian:bookworm-slim" "$0")" -eq 2 ]' "$df"
t_check "Dockerfile: build stage runs make deps && make" grep -qx 'RUN make deps && make' "$df"
t_check "Dockerfile: runs as a non-root user" grep -qE '^USER [1-9][0-9]*' "$df"
t_check "Dockerfile: HEALTHCHECK via lockctl health" grep -qE 'CMD \["/usr/local/bin/lockctl", .*"health"\]' "$df"
# Every shared library of lockd and lockctl comes from a package the final stage installs.
runtime_pkgs=$(awk '/^FROM/ { n++ } n == 2' "$df" | grep -oE 'lib[a-z0-9.+-]+[0-9]' | sort -u)
libs_ok() {
    for bin in "$REPO/build/lockd" "$REPO/build/lockctl"; do
        [ -x "$bin" ] || continue
        for so in $(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
            case $so in libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | ld-linux*) continue ;; esac
            pkg=$(dpkg -S "*/$so" 2>/dev/null | head -1 | cut -d: -f1)
            if ! echo "$runtime_pkgs" | grep -qx "$pkg"; then
                echo "  $bin needs $so from package '$pkg', not installed by the Dockerfile" >&2
                return 1
            fi
        done
    done
}
t_check "Dockerfile: runtime stage installs every library lockd and lockctl link" libs_ok

t_done
