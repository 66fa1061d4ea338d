#!/usr/bin/env bash
# scripts/slurm/sweep.sbatch on a live Slurm: a single-node cluster (munged, slurmctld, slurmd
# from Debian's munge and slurm-wlm) started on localhost with every file in WORKDIR, the sweep
# submitted as a job array of 3 tasks, waited for, merged, and compared byte for byte with one
# unsharded run. Everything it starts it stops on exit. Skips (77) where the packages are missing
# (scripts/install-deps.sh installs them); runs as root (slurmd does).
#   slurm_live_test.sh TPUSIM SOURCE_DIR WORKDIR
set -euo pipefail
tpusim=$1 src=$2 dir=$3
for exe in munged mungekey slurmctld slurmd sbatch sinfo squeue scontrol; do
  command -v "$exe" >/dev/null || [[ -x /usr/sbin/$exe ]] || { echo "SKIP: no $exe (apt-get install slurm-wlm munge)"; exit 77; }
done
((EUID == 0)) || { echo "SKIP: slurmd needs root"; exit 77; }
PATH=$PATH:/usr/sbin
rm -rf "$dir"
mkdir -p "$dir"/{munge,state,spool,log,shards}
chmod 700 "$dir/munge"
dir=$(cd "$dir" && pwd)
fail() {
  echo "FAIL: $*"
  for f in "$dir"/log/*.log; do echo "--- $f"; tail -20 "$f"; done
  exit 1
}

pids=()
cleanup() {  # the daemons this test started, by their pids
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
}
trap cleanup EXIT

# Three free TCP ports on localhost (slurmctld, slurmd, and srun's range is unused).
read -r ctld_port slurmd_port < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')

# munge: a key and a daemon with its socket in WORKDIR.
mungekey --create --keyfile="$dir/munge/munge.key" --force
chmod 400 "$dir/munge/munge.key"
munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" --force \
  || fail "munged did not start"
for _ in $(seq 50); do [[ -s $dir/munge/munged.pid ]] && break; sleep 0.1; done
pids+=("$(cat "$dir/munge/munged.pid")")

host=$(hostname -s)
cpus=$(nproc)
mem=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2))
cat >"$dir/slurm.conf" <<CONF
ClusterName=tpusimtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$dir/slurm.conf

slurmctld -i -f "$dir/slurm.conf" || fail "slurmctld did not start"
for _ in $(seq 100); do [[ -s $dir/slurmctld.pid ]] && break; sleep 0.1; done
pids+=("$(cat "$dir/slurmctld.pid")")
slurmd -f "$dir/slurm.conf" || fail "slurmd did not start"
for _ in $(seq 100); do [[ -s $dir/slurmd.pid ]] && break; sleep 0.1; done
pids+=("$(cat "$dir/slurmd.pid")")
state=
for _ in $(seq 300); do
  state=$(sinfo -h -N -o '%T' 2>/dev/null | head -1)
  [[ $state == idle ]] && break
  sleep 0.2
done
[[ $state == idle ]] || fail "the node never became idle (state '$state')"
echo "ok: single-node Slurm up ($host, $cpus CPUs, ports $ctld_port/$slurmd_port)"

# The job array: 3 tasks of workloads/sweeps/tiny.toml; the command line overrides the script's
# #SBATCH sizes for this small node. --wait returns when every task has ended, with their status.
spec=$src/workloads/sweeps/tiny.toml
cd "$dir"
sbatch --wait --array=0-2 --cpus-per-task=1 --mem-per-cpu=200M --time=10 --output="$dir/log/task-%A_%a.out" \
  --export=ALL,SPEC="$spec",OUT="$dir/shards",TPUSIM="$tpusim" "$src/scripts/slurm/sweep.sbatch" ||
  { cat "$dir"/log/task-*.out; fail "the job array failed"; }
cat "$dir"/log/task-*.out
ls "$dir/shards"
[[ $(ls "$dir"/shards/shard-*.db | wc -l) == 3 ]] || fail "expected 3 shard databases"
"$tpusim" sweep merge "$dir"/shards/shard-*.db -o "$dir/merged.csv"
"$tpusim" sweep "$spec" -j 2 -o "$dir/whole.csv"
cmp "$dir/merged.csv" "$dir/whole.csv" || { diff "$dir/merged.csv" "$dir/whole.csv" | head; fail "merged shards differ from the unsharded run"; }
echo "ok: the Slurm job array's merged shards = the unsharded run"
