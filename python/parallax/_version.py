# The package version; kept equal to the library's parallax_version() (a test checks it). Read statically by
# pyproject.toml, so building the package never imports it (nor loads the library).
__version__ = "0.1.0"
