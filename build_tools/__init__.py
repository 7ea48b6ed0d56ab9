"""Host-side machinery of the containerized toolchains, driven by noxfile.py.

One concern per module; each module's docstring says what it is for. The docker commands are planned as data
(``plan``) and run through one ``runner``, whose dry run prints them. ``wheel_metadata`` belongs to the package
build, not to this tooling. ``node/`` holds the shell scripts for a GPU node without Docker.
"""
