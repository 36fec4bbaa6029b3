"""Models: RoMem (its temporal spectrum and relation speeds) and the other families."""

from rotmem.models.base import TemporalKGE
from rotmem.models.checkpoint import FAMILIES, build_model, load_model
from rotmem.models.history_spec import HistorySpec
from rotmem.models.romem import RoMem, complex_dims
from rotmem.models.romem_complex import RoMemComplEx
from rotmem.models.spectrum import TemporalSpectrum
from rotmem.models.speeds import RelationSpeed
from rotmem.models.tntcomplex import TNTComplEx

__all__ = [
    "FAMILIES",
    "HistorySpec",
    "RelationSpeed",
    "RoMem",
    "RoMemComplEx",
    "TNTComplEx",
    "TemporalKGE",
    "TemporalSpectrum",
    "build_model",
    "complex_dims",
    "load_model",
]
