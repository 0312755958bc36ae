"""The live lab map (``manetkit lab map``): a page that shows a running lab as it moves.

``core`` is the state and the read pacing (sans-I/O), ``sources`` finds a lab's sockets
and namespaces (namespace or compose lab), ``server`` reads them and serves the page
(aiohttp), ``static/`` is the page itself (plain JavaScript and SVG, no external asset).
"""
