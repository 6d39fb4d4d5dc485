"""Makespan passes (objective ``makespan``): list scheduling, HEFT, PEFT, CP-SAT, GA, learned, auto."""
