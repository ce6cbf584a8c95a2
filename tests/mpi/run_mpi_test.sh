#!/bin/sh
# CTest driver of parallax_mpi_tests: report "skipped" (exit 77, with the reason) when fewer than 2 GPUs are
# visible, else run the suite under `mpirun -np 2` (one process per GPU).
#   tests/mpi/run_mpi_test.sh MPIEXEC BINARY [gtest options...]
# --oversubscribe: Open MPI counts slots by cores and may refuse 2 ranks on a 1-core runner.
mpiexec=$1
binary=$2
shift 2
"$binary" --probe-gpus 2 || exit $?
exec "$mpiexec" -np 2 --oversubscribe "$binary" "$@"
