"""Temporal KG data: parsing, dataset resolution and download, the synthetic graph."""

from rotmem.data.registry import fetch, find_dataset, load_dataset
from rotmem.data.synthetic import SyntheticKG, synthetic_kg
from rotmem.data.temporal_kg import DataFormatError, TemporalKG, date_of, day_of, load_directory
from rotmem.data.time_split import hold_out_weeks, split_by_time

__all__ = [
    "DataFormatError",
    "SyntheticKG",
    "TemporalKG",
    "date_of",
    "day_of",
    "fetch",
    "hold_out_weeks",
    "find_dataset",
    "load_dataset",
    "load_directory",
    "split_by_time",
    "synthetic_kg",
]
