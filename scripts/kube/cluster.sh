#!/usr/bin/env bash
# A real single-node Kubernetes cluster for tests, inside private namespaces.
#
#   scripts/kube/cluster.sh up DIR     start it; DIR holds everything it writes
#   scripts/kube/cluster.sh env DIR    print its coordinates as NAME=value lines
#   scripts/kube/cluster.sh down DIR   stop it and remove every trace (also
#                                      after a failed or half-done up)
#
# What runs: Debian's containerd (a private instance: own root, state and
# socket), etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
# the kubelet (built by scripts/kube/build.sh), all inside
#   - a private network namespace (ip netns mcekXXXXXXXX, random): the host's interfaces,
#     routes and iptables are never touched; pods get 10.252.0.0/24 on a
#     bridge inside it. A veth pair links it to the host: the host end is
#     10.251.N.1/30, the namespace end 10.251.N.2 (the node's address, where
#     the apiserver listens on 6443 and where a test's mce listens), with N
#     free at up time;
#   - a private mount namespace, with tmpfs over the few host paths that
#     containerd, CNI and the kubelet insist on (/run/containerd, /run/netns,
#     /var/lib/kubelet, /var/lib/cni, /var/log/containers), so their files and mounts stay off the
#     host and vanish with the namespace.
# Both namespaces are held by one process (DIR/holder.pid); every component
# runs under nsenter --target that process.
#
# Environment: MCE_KUBE_BIN (binaries; default: scripts/kube/build.sh's cache,
# built when missing), MCE_KUBE_GPUS (fake nvidia.com/gpu capacity of the node,
# default 2; 0 for none), MCE_KUBE_TIMEOUT (seconds up waits for the node to be
# Ready, default 120).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: $0 up|down|env DIR" >&2
  exit 2
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

node=mce-node
pod_cidr=10.252.0.0/24
service_cidr=10.253.0.0/24

log() { echo "kube cluster: $*" >&2; }

# --- state kept in DIR, so down works from files alone -----------------------

holder_pid() { cat "$dir/holder.pid" 2>/dev/null || true; }

# start_time PID: the process's start time (field 22 of /proc/PID/stat, after
# the parenthesised command name); with the PID, it names one process for good.
start_time() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

# holder_ok: DIR's namespace holder still runs. A PID is trusted only while it
# started when up recorded and its mount namespace is the recorded one, not
# the host's: a reused PID, or down run twice, never matches.
holder_ok() {
  local h m
  h=$(holder_pid)
  [ -n "$h" ] && [ -f "$dir/mntns" ] && [ -f "$dir/holder.start" ] || return 1
  [ "$(start_time "$h")" = "$(cat "$dir/holder.start")" ] || return 1
  m=$(readlink "/proc/$h/ns/mnt" 2>/dev/null) || return 1
  [ "$m" = "$(cat "$dir/mntns")" ] && [ "$m" != "$(readlink /proc/self/ns/mnt)" ]
}

# alive PID: the process exists and is not a zombie (state Z or X, dead but
# not yet reaped by its parent).
alive() {
  local st
  st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# our_netns: prints DIR's network namespace name while /run/netns/NAME is
# still the namespace up made. Names are random (mcek + 8 hex digits), never
# reused in practice; the inode recorded at up is checked too.
our_netns() {
  local ns
  ns=$(cat "$dir/netns" 2>/dev/null) || return 1
  [ -n "$ns" ] && [ -e "/run/netns/$ns" ] || return 1
  [ "$(stat -L -c %i "/run/netns/$ns")" = "$(cat "$dir/netns.inode" 2>/dev/null)" ] || return 1
  echo "$ns"
}

# inns CMD...: run CMD inside the cluster's network and mount namespaces.
inns() { nsenter --target "$(holder_pid)" --mount --net -- "$@"; }

# ns_pids: every process inside the cluster's mount or network namespace (the
# components, containerd's shims) and every descendant of one (the pods'
# processes, which runc puts in namespaces of their own).
ns_pids() {
  local mnt="" net="" p ns
  if holder_ok; then
    mnt=$(cat "$dir/mntns")
  fi
  if ns=$(our_netns); then
    net="net:[$(cat "$dir/netns.inode")]"
  fi
  [ -n "$mnt$net" ] || return 0
  local seeds=()
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" != $$ ] || continue
    local m n
    m=$(readlink "/proc/$p/ns/mnt" 2>/dev/null) || continue
    n=$(readlink "/proc/$p/ns/net" 2>/dev/null) || continue
    if { [ -n "$mnt" ] && [ "$m" = "$mnt" ]; } || { [ -n "$net" ] && [ "$n" = "$net" ]; }; then
      seeds+=("$p")
    fi
  done
  [ ${#seeds[@]} -gt 0 ] || return 0
  # Add their descendants, to a fixed point.
  ps -e -o pid=,ppid= | awk -v seeds="${seeds[*]}" '
    BEGIN { n = split(seeds, s, " "); for (i = 1; i <= n; i++) keep[s[i]] = 1 }
    { parent[$1] = $2; pids[NR] = $1 }
    END {
      changed = 1
      while (changed) {
        changed = 0
        for (i in pids) { p = pids[i]; if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; changed = 1 } }
      }
      for (p in keep) print p
    }'
}

# --- down ---------------------------------------------------------------------

down() {
  local sock="$dir/containerd/containerd.sock" h=""
  if holder_ok; then
    h=$(holder_pid)
    # The kubelet first, so that it restarts nothing; then every container task.
    local k
    k=$(cat "$dir/pids/kubelet" 2>/dev/null || true)
    if [ -n "$k" ] && [ "$(readlink "/proc/$k/ns/mnt" 2>/dev/null)" = "$(cat "$dir/mntns")" ]; then
      kill -TERM "$k" 2>/dev/null || true
    fi
    if [ -S "$sock" ]; then
      local t
      # runc puts each container in the cgroup /k8s.io/<id> of every
      # hierarchy; remember them, to remove what a killed shim leaves.
      inns ctr -a "$sock" -n k8s.io containers ls -q 2>/dev/null | sed 's|^|k8s.io/|' >>"$dir/cgroups" || true
      for t in $(inns ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
        inns ctr -a "$sock" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
      done
      sleep 0.5
      for t in $(inns ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
        inns ctr -a "$sock" -n k8s.io tasks rm -f "$t" >/dev/null 2>&1 || true
      done
    fi
  fi
  # Then every process left, by PID: components, shims, pods' processes, holder.
  local i pids
  for i in 1 2 3 4 5 6 7 8 9 10; do
    pids=$(ns_pids)
    [ -n "$pids" ] || break
    if [ "$i" -le 2 ]; then
      # shellcheck disable=SC2086
      kill -TERM $pids 2>/dev/null || true
    else
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
    fi
    sleep 0.5
  done
  if [ -n "$(ns_pids)" ]; then
    log "processes still running: $(ns_pids | tr '\n' ' ')"
  fi
  if [ -n "$h" ]; then
    kill -KILL "$h" 2>/dev/null || true
    # Wait until it has died. Dead is gone or a zombie: the holder was started
    # in the background by up, so its reaper is whatever adopted it (init),
    # which may collect it late or never; a zombie holds no namespace.
    for i in $(seq 1 50); do
      alive "$h" || break
      sleep 0.1
    done
  fi
  # The mount namespace and its mounts went with its last process. Cgroups
  # stay: this cluster's containers' (empty now), then /k8s.io itself unless
  # another cluster's containers are still in it (rmdir refuses then).
  if [ -f "$dir/cgroups" ]; then
    sort -u "$dir/cgroups" | while read -r cg; do
      [ -n "$cg" ] || continue
      for d in /sys/fs/cgroup/*/"$cg"; do
        [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
      done
    done
    rm -f "$dir/cgroups"
  fi
  rmdir /sys/fs/cgroup/*/k8s.io 2>/dev/null || true
  local ns
  ns=$(our_netns || true)
  exec 9>/run/lock/mce-kube.lock
  flock 9
  if [ -n "$ns" ]; then
    ip link del "${ns}h" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  fi
  # The empty folders up had to create as mount points go when no other
  # cluster runs: removing a folder that is a mount point in another mount
  # namespace would detach that cluster's tmpfs.
  if ! ls /run/netns/mcek* >/dev/null 2>&1; then
    for d in /var/lib/kubelet /var/lib/cni /var/log/containers; do
      if [ -f "/run/lock/mce-kube.created${d//\//_}" ]; then
        rmdir "$d" 2>/dev/null || true
        rm -f "/run/lock/mce-kube.created${d//\//_}"
      fi
    done
  fi
  flock -u 9
  exec 9>&-
  # Forget it all, so that a second down touches nothing.
  rm -f "$dir/holder.pid" "$dir/holder.start" "$dir/mntns" "$dir/netns" "$dir/netns.inode"
  rm -rf "$dir/pids"
}

# --- up -------------------------------------------------------------------------

# wait_for WHAT SECONDS CMD...: poll CMD every 0.1 s until it succeeds.
wait_for() {
  local what=$1 secs=$2 deadline
  shift 2
  deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "timed out after ${secs}s waiting for $what"
      return 1
    fi
    sleep 0.1
  done
}

# start NAME CMD...: start a component inside the namespaces, its output in
# DIR/logs/NAME.log and its PID in DIR/pids/NAME.
start() {
  local name=$1
  shift
  nsenter --target "$(holder_pid)" --mount --net -- "$@" >"$dir/logs/$name.log" 2>&1 &
  echo $! >"$dir/pids/$name"
}

# running NAME: the component start recorded as NAME still runs.
running() { alive "$(cat "$dir/pids/$1" 2>/dev/null)"; }

api() {
  curl -sS --fail --cacert "$dir/pki/apiserver.crt" -H "Authorization: Bearer $(cat "$dir/token")" "$@"
}

pause_image() {
  # Tagged by the content of its source, so a change rebuilds it.
  local tag ctx
  tag=$(cat "$here/pause/main.go" "$here/pause/Dockerfile" | sha256sum | cut -c1-12)
  pause_ref="mce-kube/pause:$tag"
  if ! docker image inspect "$pause_ref" >/dev/null 2>&1; then
    ctx="$dir/pause-build"
    mkdir -p "$ctx"
    (cd "$here/pause" && CGO_ENABLED=0 "${GO:-go}" build -trimpath -ldflags "-s -w" -o "$ctx/pause" .)
    cp "$here/pause/Dockerfile" "$ctx/"
    docker build -q -t "$pause_ref" "$ctx" >"$dir/logs/pause-build.log" 2>&1 || { cat "$dir/logs/pause-build.log" >&2; exit 1; }
    rm -rf "$ctx"
  fi
}

up() {
  local t0 bin
  t0=$(date +%s.%N)
  for c in nsenter unshare ip containerd ctr curl openssl docker python3; do
    command -v "$c" >/dev/null || { log "missing $c (scripts/deps.sh installs it)"; exit 1; }
  done
  [ -x /usr/lib/cni/bridge ] || { log "missing /usr/lib/cni/bridge (Debian package containernetworking-plugins)"; exit 1; }
  [ "$(id -u)" = 0 ] || { log "needs root"; exit 1; }
  if [ -f "$dir/holder.pid" ]; then log "$dir already holds a cluster; run down first"; exit 1; fi
  bin=${MCE_KUBE_BIN:-$("$here/build.sh")}
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    [ -x "$bin/$c" ] || { log "missing $bin/$c (scripts/kube/build.sh builds it)"; exit 1; }
  done
  trap 'rc=$?; if [ $rc -ne 0 ]; then log "up failed; logs in $dir/logs"; for f in "$dir"/logs/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }; done; down; fi' EXIT

  mkdir -p "$dir"/{logs,pids,pki,etcd,kubelet/root,kubelet/certs,kubelet/pods-logs,cni/conf,cni/data,containerd/root,containerd/state,containerd/opt}
  pause_image

  # A random netns name (so that a stale DIR never names another cluster's)
  # and a free 10.251.N.0/30, chosen under a lock so that clusters started at
  # once get different ones.
  local n ns found=""
  ns=mcek$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
  exec 9>/run/lock/mce-kube.lock
  flock 9
  for n in $(seq 0 255); do
    if ! ip -o addr show | grep -q " 10\.251\.$n\.1/"; then found=1; break; fi
  done
  [ -n "$found" ] || { log "no free 10.251.N.0/30"; exit 1; }
  addr=10.251.$n.2
  echo "$addr" >"$dir/addr"
  ip netns add "$ns"
  stat -L -c %i "/run/netns/$ns" >"$dir/netns.inode"
  echo "$ns" >"$dir/netns"
  ip link add "${ns}h" type veth peer name eth0 netns "$ns"
  ip addr add "10.251.$n.1/30" dev "${ns}h"
  ip link set "${ns}h" up
  flock -u 9
  exec 9>&-
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$addr/30" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route add default via "10.251.$n.1"

  # The holder: enters the netns, makes a private mount namespace, covers the
  # host paths the components write with tmpfs, then sleeps.
  # Mount points for the holder's tmpfs; down removes them when it created
  # them (marked in /run/lock, shared by all clusters) and no cluster runs.
  local d
  for d in /var/lib/kubelet /var/lib/cni /var/log/containers; do
    if [ ! -e "$d" ]; then mkdir -p "$d" && touch "/run/lock/mce-kube.created${d//\//_}"; fi
  done
  nsenter --net="/run/netns/$ns" unshare --mount --propagation private -- sh -c '
    for d in /run/containerd /run/netns /var/lib/kubelet /var/lib/cni /var/log/containers; do
      mkdir -p "$d" && mount -t tmpfs -o mode=0755 mce-kube "$d" || exit 1
    done
    exec sleep infinity' </dev/null >"$dir/logs/holder.log" 2>&1 &
  echo $! >"$dir/holder.pid"
  wait_for "the namespace holder" 10 sh -c "grep -q ' /var/log/containers ' /proc/$(holder_pid)/mounts"
  readlink "/proc/$(holder_pid)/ns/mnt" >"$dir/mntns"
  start_time "$(holder_pid)" >"$dir/holder.start"

  # Credentials: a service-account key pair and a static bearer token.
  openssl genrsa -out "$dir/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/pki/sa.key" -pubout -out "$dir/pki/sa.pub" 2>/dev/null
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/token"
  echo "$(cat "$dir/token"),admin,admin,system:masters" >"$dir/pki/tokens.csv"
  chmod 600 "$dir/token" "$dir/pki/tokens.csv" "$dir/pki/sa.key"

  # containerd: private root, state, socket; the quirks this sandbox needs.
  local sock="$dir/containerd/containerd.sock"
  cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/$pause_ref"
  # Without CAP_SYS_RESOURCE, runc cannot lower oom_score_adj: pod sandboxes
  # fail with "can't get final child's PID from pipe: EOF" unless restricted.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/conf"
EOF
  cat >"$dir/cni/conf/10-mce.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "mce-kube",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
     "ipam": {"type": "host-local", "dataDir": "$dir/cni/data",
              "ranges": [[{"subnet": "$pod_cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "loopback"}
  ]
}
EOF
  start containerd containerd --config "$dir/containerd/config.toml"
  wait_for "containerd" 30 inns ctr -a "$sock" version
  docker save "$pause_ref" | inns ctr -a "$sock" -n k8s.io images import - >/dev/null

  start etcd "$bin/etcd" --name mce --data-dir "$dir/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster mce=http://127.0.0.1:2380 --unsafe-no-fsync --quota-backend-bytes=1073741824
  wait_for "etcd" 30 inns curl -sf http://127.0.0.1:2379/health

  start kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 \
    --advertise-address="$addr" --bind-address="$addr" --secure-port=6443 \
    --cert-dir="$dir/pki" \
    --token-auth-file="$dir/pki/tokens.csv" \
    --authorization-mode=AlwaysAllow \
    --service-account-key-file="$dir/pki/sa.pub" \
    --service-account-signing-key-file="$dir/pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-cluster-ip-range="$service_cidr" \
    --allow-privileged=true \
    --enable-priority-and-fairness=false \
    --kubelet-preferred-address-types=InternalIP
  wait_for "kube-apiserver's certificate" 30 test -s "$dir/pki/apiserver.crt"
  if ! wait_for "kube-apiserver" 60 api_ready || ! running kube-apiserver; then
    # Say which check failed, or why curl could not ask.
    log "kube-apiserver running: $(running kube-apiserver && echo yes || echo no); its readyz:"
    api "https://$addr:6443/readyz?verbose" >&2 || true
    exit 1
  fi
  local t_api
  t_api=$(date +%s.%N)

  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: mce
  cluster:
    server: https://$addr:6443
    certificate-authority: $dir/pki/apiserver.crt
users:
- name: admin
  user:
    token: $(cat "$dir/token")
contexts:
- name: mce
  context: {cluster: mce, user: admin, namespace: default}
current-context: mce
EOF
  chmod 600 "$dir/kubeconfig"

  start kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig="$dir/kubeconfig" --leader-elect=false \
    --service-account-private-key-file="$dir/pki/sa.key" \
    --root-ca-file="$dir/pki/apiserver.crt" \
    --service-cluster-ip-range="$service_cidr" \
    --bind-address=127.0.0.1
  start kube-scheduler "$bin/kube-scheduler" \
    --kubeconfig="$dir/kubeconfig" --leader-elect=false --bind-address=127.0.0.1

  cat >"$dir/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# These machines use cgroup v1, without systemd managing cgroups.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
address: $addr
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
# Tests load images by hand: never evict or garbage-collect them.
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
podLogsDir: $dir/kubelet/pods-logs
containerRuntimeEndpoint: unix://$sock
resolvConf: ""
serializeImagePulls: false
EOF
  start kubelet "$bin/kubelet" \
    --config="$dir/kubelet/config.yaml" --kubeconfig="$dir/kubeconfig" \
    --root-dir="$dir/kubelet/root" --cert-dir="$dir/kubelet/certs" \
    --hostname-override="$node" --node-ip="$addr"

  local secs=${MCE_KUBE_TIMEOUT:-120}
  wait_for "node $node Ready" "$secs" node_ready
  for c in containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    running "$c" || { log "$c exited"; exit 1; }
  done
  local t_ready
  t_ready=$(date +%s.%N)

  # Fake GPUs: extended-resource capacity on the node's status, which the
  # scheduler counts as it would a device plugin's. Allocatable too, so it
  # counts at once rather than after the kubelet's next status update (10 s);
  # the kubelet keeps both as they are.
  local gpus=${MCE_KUBE_GPUS:-2}
  if [ "$gpus" != 0 ]; then
    api -X PATCH -H 'Content-Type: application/json-patch+json' \
      --data "[{\"op\":\"add\",\"path\":\"/status/capacity/nvidia.com~1gpu\",\"value\":\"$gpus\"},{\"op\":\"add\",\"path\":\"/status/allocatable/nvidia.com~1gpu\",\"value\":\"$gpus\"}]" \
      "https://$addr:6443/api/v1/nodes/$node/status" >/dev/null
    wait_for "nvidia.com/gpu allocatable" 30 node_gpus "$gpus"
  fi
  trap - EXIT
  log "up: apiserver ready $(elapsed "$t0" "$t_api")s, node Ready $(elapsed "$t0" "$t_ready")s after start; kubeconfig $dir/kubeconfig"
}

elapsed() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$1" "$2"; }

# api_ready: the apiserver answers ready, or has exited (no use waiting).
api_ready() {
  running kube-apiserver || return 0
  api "https://$(cat "$dir/addr"):6443/readyz"
}

node_ready() {
  api "https://$(cat "$dir/addr"):6443/api/v1/nodes/$node" | python3 -c '
import json, sys
n = json.load(sys.stdin)
ok = any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
sys.exit(0 if ok else 1)'
}

node_gpus() {
  api "https://$(cat "$dir/addr"):6443/api/v1/nodes/$node" | python3 -c '
import json, sys
n = json.load(sys.stdin)
sys.exit(0 if n["status"].get("allocatable", {}).get("nvidia.com/gpu") == sys.argv[1] else 1)' "$1"
}

env_() {
  [ -f "$dir/holder.pid" ] || { log "no cluster in $dir"; exit 1; }
  cat <<EOF
KUBECONFIG=$dir/kubeconfig
MCE_KUBE_SERVER=https://$(cat "$dir/addr"):6443
MCE_KUBE_TOKEN_FILE=$dir/token
MCE_KUBE_CA=$dir/pki/apiserver.crt
MCE_KUBE_ADDR=$(cat "$dir/addr")
MCE_KUBE_NETNS=$(cat "$dir/netns")
MCE_KUBE_NETNS_PATH=/run/netns/$(cat "$dir/netns")
MCE_KUBE_HOLDER_PID=$(holder_pid)
MCE_KUBE_CONTAINERD_SOCK=$dir/containerd/containerd.sock
MCE_KUBE_NODE=$node
EOF
}

case "$cmd" in
  up) up ;;
  down) down ;;
  env) env_ ;;
  *) echo "usage: $0 up|down|env DIR" >&2; exit 2 ;;
esac
