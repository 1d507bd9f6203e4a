"""Capacity planning: the cheapest deployment that meets both latency SLOs.

- `space`: the candidates (GPU, TP, replicas, precisions, engine knobs) and the traffic;
- `prices`: GPU-hour prices with their sources and date;
- `prune`: bounds from the roofline that rule a candidate out before any simulation;
- `evaluate`: one candidate simulated over its share of the traffic;
- `sweep`: every candidate, pruned or simulated over a process pool, cached on disk;
- `frontier`: the best configuration, the Pareto frontier, what each knob bought.
"""
