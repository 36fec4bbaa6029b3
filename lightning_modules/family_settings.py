"""The model family's settings in a Phase-2 config: its class and its own arguments.

``Phase2Module`` takes the model as ``family``, which LightningCLI builds from its class and its
arguments, each family taking only those of its constructor::

    model:
      family:
        class_path: rotmem.models.TNTComplEx
        init_args: {dim: 256, init_scale: 0.01}
      lr: 0.1

(``--model.family.dim 128`` on the command line; ``--model.family RoMem`` switches the class).
The dataset's sizes, ``tau0`` and ``num_days`` are linked into ``init_args`` by ``RoMemCLI``.
A key the parser does not know (a family argument written as ``model.dim``) ends in one line.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from rotmem.errors import BadSettingError, UserInputError
from rotmem.models import FAMILIES, TemporalKGE
from rotmem.training.family import LINKED, class_path


def family_spec(model: TemporalKGE) -> dict[str, Any]:
    """``{"class_path": ..., "init_args": ...}`` that builds ``model`` again (its ``config``): what a
    checkpoint saves as the hyper-parameter ``family``."""
    return {"class_path": class_path(type(model)), "init_args": dict(model.config)}


def settings_of(cls: type[TemporalKGE]) -> list[str]:
    """The arguments a config may give ``cls`` (its constructor's, less the linked ones)."""
    names = inspect.signature(cls).parameters
    return [name for name in names if name not in LINKED]


def build_family(class_type: type[TemporalKGE], *args: Any, **kwargs: Any) -> TemporalKGE:
    """A jsonargparse instantiator for the model families: a constructor refusing its arguments (a
    ``ValueError``: a width of 0, a negative window) becomes ``BadSettingError`` naming
    ``model.family``, one line on the command line."""
    try:
        return class_type(*args, **kwargs)
    except ValueError as error:
        if isinstance(error, UserInputError):
            raise
        raise BadSettingError(f"model.family ({class_type.__name__}): {error}") from None


_UNKNOWN_ARGUMENT = re.compile(
    r"Parser key \"model\.family\": Problem with given class_path '([\w.]+)': "
    r"(?:Option|Key) ['\"](\w+)['\"] is not (?:accepted|expected)"
)


def parse_error_line(message: str) -> str:
    """jsonargparse's parse error as one line; an unknown family argument as the family's name,
    the argument and the arguments the family takes."""
    line = " ".join(message.split())
    found = _UNKNOWN_ARGUMENT.search(line)
    if found is None:
        return line
    path, name = found.groups()
    cls = next((cls for cls in FAMILIES.values() if cls.__name__ == path.rpartition(".")[2]), None)
    if cls is None:
        return line
    return (
        f"model.family: {cls.__name__} takes no argument {name!r} "
        f"(its arguments: {', '.join(settings_of(cls))})"
    )
