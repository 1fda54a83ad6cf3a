"""evalprism: split an averaged evaluation score into its spectrum.

Analyses live in subpackages (``evalprism.ecdf``, ...); numeric kernels in
``evalprism.stats``; readers in ``evalprism.io``; embedders in ``evalprism.embed``.
Nothing is imported eagerly here so that ``import evalprism`` stays cheap.
"""

from evalprism.errors import EvalprismError

__all__ = ["EvalprismError", "__version__"]
__version__ = "0.1.0"
