#!/bin/sh
# Entry point of the docker-compose cluster: every container writes the same config with
# the same generator as the single-machine cluster (synergy dev-cluster config), shares one
# munge key through a volume, then runs its role in the foreground.
#   synergy-entrypoint controller | node NAME | login
# The controller's container runs slurmctld with synergy's job_submit hook and, beside it
# as at a site, synergy's controller (enforce, FIFO + TUNE, every 2 s); both log to the
# container's output (docker logs), the controller's audit log is $STATE/audit.jsonl.
set -eu
STATE=/var/lib/synergy-dev
KEYDIR=/run/synergy-munge-key
NODES=${SYNERGY_NODES:-4}
HOOK=
# The controller's container also gets synergy's hook and the controller's config
# ($STATE/synergy.toml, the demo's: enforce, FIFO + TUNE, every 2 s).
[ "$1" = controller ] && HOOK="--hook --controller"

synergy dev-cluster config --containers --dir "$STATE" --nodes "$NODES" $HOOK >/dev/null
export SLURM_CONF="$STATE/etc/slurm.conf"

if [ "$1" = controller ] && [ ! -s "$KEYDIR/munge.key" ]; then
    dd if=/dev/urandom of="$KEYDIR/munge.key.tmp" bs=1024 count=1 2>/dev/null
    mv "$KEYDIR/munge.key.tmp" "$KEYDIR/munge.key"
fi
while [ ! -s "$KEYDIR/munge.key" ]; do sleep 0.5; done
install -d -o munge -g munge -m 0755 "$STATE/munge"
install -o munge -g munge -m 0400 "$KEYDIR/munge.key" "$STATE/munge/munge.key"
runuser -u munge -- munged --socket="$STATE/munge/munge.socket.2" \
    --key-file="$STATE/munge/munge.key" --pid-file="$STATE/munge/munged.pid" \
    --log-file="$STATE/munge/munged.log" --seed-file="$STATE/munge/munged.seed"
mkdir -p "$STATE/spool/ctld" "$STATE/run" "$STATE/log"
# Everyone's shell and synergy-sbatch find the cluster.
echo "export SLURM_CONF=$SLURM_CONF" > /etc/profile.d/slurm.sh

case "$1" in
    controller)
        synergy controller run --config "$STATE/synergy.toml" &
        exec slurmctld -D -f "$SLURM_CONF" ;;
    node) mkdir -p "$STATE/spool/$2"; exec slurmd -D -N "$2" -f "$SLURM_CONF" ;;
    login) exec sleep infinity ;;
    *) echo "usage: synergy-entrypoint controller | node NAME | login" >&2; exit 2 ;;
esac
