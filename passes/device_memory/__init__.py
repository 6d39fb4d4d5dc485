"""Multi-device peak-memory passes (objective ``peak-mem-devices``, paper 003): joint placement and
schedule with transfers.  BRKGA, local search, graph partitioning + DFS, auto."""
