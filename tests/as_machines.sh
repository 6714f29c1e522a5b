#!/usr/bin/env bash
# tests/as_machines.sh — run a rank as if it were on one of several machines, all on this one:
#   mpirun -np N tests/as_machines.sh LAYOUT [ENV] CMD ...
# LAYOUT gives the ranks of each machine in turn ("2,2": ranks 0-1 on machine m0, 2-3 on m1;
# "3,1" uneven). The rank's machine goes to ./train as GPTMEM_MACHINE (parallel/comm.h: the
# ranks split by it instead of by shared memory). ENV is what the launcher says of the local
# rank: ompi (Open MPI's variables, set to the simulated machine's), srun (Open MPI's removed,
# Slurm's set as srun sets them: SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, SLURM_NNODES,
# SLURM_NODEID), or none (no local rank anywhere: the rank finds its place from MPI).
set -u
layout=$1; shift
how=ompi
case ${1:-} in ompi|srun|none) how=$1; shift ;; esac
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
first=0; machine=0; size=0
IFS=, read -r -a sizes <<<"$layout"
for s in "${sizes[@]}"; do
  if [ "$rank" -lt $((first + s)) ]; then size=$s; break; fi
  first=$((first + s)); machine=$((machine + 1))
done
[ "$size" -gt 0 ] || { echo "as_machines.sh: rank $rank is past the layout $layout" >&2; exit 2; }
export GPTMEM_MACHINE=m$machine
local=$((rank - first))
case $how in
  ompi) export OMPI_COMM_WORLD_LOCAL_RANK=$local OMPI_COMM_WORLD_LOCAL_SIZE=$size ;;
  srun) unset OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_LOCAL_SIZE
        export SLURM_PROCID=$rank SLURM_LOCALID=$local SLURM_NTASKS=${OMPI_COMM_WORLD_SIZE:-1} \
               SLURM_NNODES=${#sizes[@]} SLURM_NODEID=$machine ;;
  none) unset OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_LOCAL_SIZE SLURM_LOCALID MPI_LOCALRANKID LOCAL_RANK ;;
esac
exec "$@"
