"""Rank functions the chapter-12 cost-model tests start under mpiexec."""

from minitorch.distributed.cost import measure_link, measure_reductions


def link(comm):
    return measure_link(comm, repeats=5)


def reductions(comm, sizes):
    return measure_reductions(comm, sizes, repeats=3)
