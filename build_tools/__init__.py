"""Host-side machinery of the containerized toolchains (used by noxfile.py).

Modules, one concern each:

- ``matrix``      load and validate ``configs/toolchains.toml`` (errors name the file and key)
- ``tomlfields``  the TOML reader of the matrix and the route source: a dataclass read by its fields, every
                  problem at once
- ``env``         what passes from the host into builds: pip index/find-links/CA bundle, proxies
- ``context``     stage the docker build context (build inputs, scripts, wheelhouse, tests) and hash inputs
- ``dockercli``   find a BuildKit-capable docker client, check the daemon, inspect images
- ``plan``        the docker commands of each step (pure: unit-tested, printed by ``--dry-run``)
- ``runner``      run a planned command with progress, a full log and a one-line error; the dry run is its alone
                  (a question asked through it answers ``PLANNED``)
- ``wheelcheck``  read a repaired wheel: tags, version label, grafted libraries (no torch inside)
- ``outputs``     the one atomic writer (``replacing``): files and whole report directories (temp + rename)
- ``baseimage``   make a local base image with debootstrap + ``docker import``
- ``gpu``         what a test container's ``--gpus`` needs from the host (GPU device, NVIDIA Container Toolkit)
- ``hostdev``     what a test container's ``--device`` flags and optional mounts need from the host (DCU)
- ``summary``     run summary (stages, images, wheel, test counts) as a table and as markdown
- ``images``      the docker client, base images (present > stand-in > pulled), pruning, the history check
- ``state``       what the last build of each toolchain left (build/state/<toolchain>.json)
- ``flow``        the build flow and the test image that the nox sessions call
- ``containers``  the test, bench and qualify runs in the test image (one shared tail)
- ``git``         the checkout's HEAD commit (``head_commit``) and its time (``source_date_epoch``)
- ``upkeep``      the base-image and clean sessions
- ``distribute``  the index, publish and install-<toolchain> sessions (index.py writes the pages)
- ``generate_confs``  write configs/backends_<accelerator>.conf from configs/routes.toml (run as a script)

``wheel_metadata`` belongs to the package build (not to this tooling).

``node/`` holds the shell scripts for a GPU node without Docker, run from the repository root:
``cuda_node.sh`` builds the wheel against the node's torch and runs the suites, the checks of tests/node and the
benchmark; ``index_node.sh`` installs from a carried index as a cluster node would, then the suites and benchmark.
"""

ROOT_MARKERS = ("noxfile.py", "configs")
