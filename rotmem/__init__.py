"""rotmem: GPU-accelerated training and scoring kernels for RoMem temporal KG memory."""

from rotmem.data import TemporalKG, load_dataset
from rotmem.evaluation import evaluate
from rotmem.gate import SemanticSpeedGate
from rotmem.models import RoMem, load_model

__version__ = "0.1.0"

__all__ = ["RoMem", "SemanticSpeedGate", "TemporalKG", "evaluate", "load_dataset", "load_model"]
