"""The lab: N nodes on one machine (network namespaces) over an emulated 802.11 medium.

- ``manetkit.lab.scenario``: the scenario file format (nodes, radio, mobility).
- ``manetkit.lab.medium``: the medium process (propagation, airtime/MAC, mobility,
  ground truth) that every node's radio attaches to.
- ``manetkit.lab.radio``: the node-side attachment that owns the TAP ``radio0``.
- ``manetkit.lab.nodes``: namespaces and processes of a lab; ``manetkit.lab.cli``: commands.
"""
