#!/usr/bin/env bash
# Makes rootful podman able to run containers on this host, offline, for the
# container tests (issue 29). Idempotent: quick when already set up.
#  - installs podman, runc and busybox-static (Debian packages);
#  - writes /etc/containers/containers.conf: runc (crun fails on hybrid
#    cgroups: "cgroups in hybrid mode not supported"), cgroupfs, and default
#    ulimits within this host's hard limits (podman's defaults ask for more
#    than the host allows: "setrlimit RLIMIT_NPROC: Operation not permitted");
#  - builds the test image $CANOPY_TEST_IMAGE (localhost/canopy-test:latest)
#    with `podman import` of a busybox-static root file system: no registry;
#  - checks that `podman run --rm IMAGE true` works.
# Needs root and the Debian mirror (only when a package is missing).
set -euo pipefail
IMAGE=${CANOPY_TEST_IMAGE:-localhost/canopy-test:latest}
CONF=/etc/containers/containers.conf

missing=()
for p in podman runc busybox-static; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "apt: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Hard limits of this host, read here: a container may not ask for more.
nofile=$(ulimit -Hn)
nproc=$(ulimit -Hu)
[ "$nproc" = unlimited ] && nproc=4096
[ "$nproc" -gt 4096 ] && nproc=4096
[ "$nofile" = unlimited ] && nofile=1048576
want=$(cat <<CONFEOF
# Written by canopy's scripts/containers/setup.sh (issue 29).
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONFEOF
)
mkdir -p /etc/containers
if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$want" ]; then
  [ -f "$CONF" ] && ! grep -q 'canopy' "$CONF" && cp "$CONF" "$CONF.before-canopy"
  printf '%s\n' "$want" > "$CONF"
  echo "wrote $CONF (nofile=$nofile, nproc=$nproc)"
fi

if ! podman image exists "$IMAGE"; then
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  mkdir -p "$root"/{bin,tmp,outputs,etc,proc,sys,dev}
  cp /bin/busybox "$root/bin/busybox"
  for app in $("$root/bin/busybox" --list); do
    [ "$app" = busybox ] || ln -sf busybox "$root/bin/$app"
  done
  echo 'root:x:0:0:root:/:/bin/sh' > "$root/etc/passwd"
  echo 'root:x:0:' > "$root/etc/group"
  tar -C "$root" -cf - . | podman import --change 'CMD ["/bin/sh"]' --change 'ENV PATH=/bin' - "$IMAGE" >/dev/null
  echo "built $IMAGE offline from busybox-static"
fi

if ! out=$(timeout 60 podman run --rm "$IMAGE" true 2>&1); then
  echo "podman cannot run a container here: $out" >&2
  exit 1
fi
echo "containers: podman $(podman --version | awk '{print $3}') runs $IMAGE"
