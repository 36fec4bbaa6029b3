"""Models: the temporal spectrum, relation speeds and RoMem."""

from rotmem.models.checkpoint import load_model
from rotmem.models.romem import RoMem, complex_dims
from rotmem.models.spectrum import TemporalSpectrum
from rotmem.models.speeds import RelationSpeed

__all__ = ["RelationSpeed", "RoMem", "TemporalSpectrum", "complex_dims", "load_model"]
