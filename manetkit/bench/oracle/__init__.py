"""Reference simulators the lab's medium is validated against.

``ns3/`` holds two small C++ programs for ns-3 3.37 (Debian's ``libns3-dev``): ``per``
(delivery ratio of one transmission vs distance) and ``chain`` (bulk TCP throughput over a
static 802.11b chain). :mod:`.build` compiles them, :mod:`.simulate` runs them on the
validation grid of :mod:`.params`, :mod:`.curves` reads the resulting curves and
:mod:`.plot` draws them, beside a second curve set of the same shape (the lab medium's)
when one is given. ``manetkit bench medium --oracle ns3`` is the command (:mod:`.bench`).
"""
