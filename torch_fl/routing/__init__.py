"""Routing: from the conf and the FLAGOS_OP_* overrides to the table the C++ router runs, and the questions asked
of the routes in force.

``conf`` parses a conf, ``table`` resolves route chains into a table, ``routes`` holds the table in force (and the
followers it tells of a new one), ``publish`` hands it to the router and brings provider calls back, ``dispatcher``
asks torch's dispatcher which operators exist and reach the router, ``shipped`` finds the wheel's confs and ``log``
writes the FLAGOS_LOG lines about routes. The public names are torch_fl's own (``torch_fl.route``,
``torch_fl.reload_routes``, ...). This file imports nothing, so the unit tests can import ``conf`` and ``table``
without the compiled core.
"""
