"""Host-side machinery of the containerized toolchains, driven by noxfile.py; docs/architecture.md ("The layers")
says what each module owns. The tooling reads the product (``product.py``); the product never imports it."""
