"""Host-side machinery of the containerized toolchains, driven by noxfile.py; docs/architecture.md ("The layers")
says what each module owns. ``wheel_metadata`` belongs to the package build (pyproject.toml), not to this tooling."""
