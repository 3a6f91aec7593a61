"""The simulation (issue 39): the library's own scripts and client through seeded schedules.

Its foundation is here: a simulated Redis node that runs the library's Lua
scripts unmodified, in Lua 5.1 as Redis does (``node.py``; its parts:
``lua.py``, ``keyspace.py``, ``datacmds.py``, ``servercmds.py``,
``commands.py``, ``replies.py``), the RESP codec the simulated network
feeds through it (``resp.py``), and the differential check that holds the
node to a real ``redis-server`` (``diff.py``, ``steps.py``, ``real.py``;
``python -m tests.sim diff``).
"""
