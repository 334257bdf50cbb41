"""The one version string of the distribution (`pyproject.toml` reads it from here).

Not read back from package metadata at run time: importing `importlib.metadata` costs
~45 ms, more than a sixth of the sidecar's start-up budget.
"""

from typing import Final

VERSION: Final = "0.2.0"
