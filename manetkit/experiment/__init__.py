"""``manetkit experiment``: a matrix of lab runs (scenario x stack x proxy x speed x seed x
traffic), one after another, with one JSON per run and a generated report.

* :mod:`.spec` the YAML spec (refused with field + reason) and the runs it expands to;
* :mod:`.runner` runs the matrix, resumable, never two labs at once;
* :mod:`.execute` one run: lab up, traffic, metrics, lab down;
* :mod:`.bulk`, :mod:`.web`, :mod:`.webclient`, :mod:`.wrk` the traffic kinds;
* :mod:`.metrics` Holland & Vaidya's expected throughput and partition time from the
  medium's ground truth, control overhead from the daemons' counters;
* :mod:`.report` tables and PNG plots from a results directory.
"""
