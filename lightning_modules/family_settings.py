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

Before, every family's arguments were flat keys of ``model`` (``model.dim``, ``model.family:
tntcomplex``). A config or command line of that layout ends in one line naming the key and its new
place (``check_no_flat_keys``); a checkpoint of that layout resumes (``upgrade_hparams``), its model
built with the arguments its family took then (``rotmem.models.checkpoint.family_arguments``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rotmem.errors import BadSettingError, UserInputError
from rotmem.models import FAMILIES, TemporalKGE
from rotmem.models.checkpoint import family_arguments
from rotmem.training.family import LINKED, class_path

# constructor arguments that are not settings (the training facts a model may be built with)
NOT_SETTINGS = ("facts",)


def family_spec(model: TemporalKGE) -> dict[str, Any]:
    """``{"class_path": ..., "init_args": ...}`` that builds ``model`` again (its ``config``): what a
    checkpoint saves as the hyper-parameter ``family``."""
    return {"class_path": class_path(type(model)), "init_args": dict(model.config)}


def settings_of(cls: type[TemporalKGE]) -> list[str]:
    """The arguments a config may give ``cls`` (its constructor's, less the linked ones)."""
    names = inspect.signature(cls).parameters
    return [name for name in names if name not in LINKED + NOT_SETTINGS]


# every family's arguments: the flat keys of the old layout
FLAT_KEYS = sorted({name for cls in FAMILIES.values() for name in settings_of(cls)})


def check_no_flat_keys(args: list[str]) -> None:
    """``UserInputError`` naming the first family argument given in the old flat layout: a
    ``--model.dim`` or ``--model.family tntcomplex`` on the command line, a ``model: {dim: ...}``
    or ``model: {family: tntcomplex}`` in a ``--config`` file."""
    for i, arg in enumerate(args):
        if arg in ("--config", "-c") and i + 1 < len(args):
            _check_config_file(Path(args[i + 1]))
        elif arg.startswith("--config="):
            _check_config_file(Path(arg.split("=", 1)[1]))
        elif arg.startswith("--model."):
            key, _, value = arg[len("--model.") :].partition("=")
            if key in FLAT_KEYS:
                raise UserInputError(_moved(f"--model.{key}", key))
            if key == "family" and (value or (args[i + 1] if i + 1 < len(args) else "")) in FAMILIES:
                raise UserInputError(_old_family("--model.family", value or args[i + 1]))


def _check_config_file(path: Path) -> None:
    import yaml

    if not path.is_file():
        return  # LightningCLI names a missing file
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        return  # LightningCLI names a malformed file
    model = values.get("model") if isinstance(values, dict) else None
    if not isinstance(model, dict):
        return
    family = model.get("family")
    if isinstance(family, str) and family in FAMILIES:
        raise UserInputError(_old_family(f"{path}: model.family", family))
    for key in model:
        if key in FLAT_KEYS:
            raise UserInputError(_moved(f"{path}: model.{key}", key))


def _old_family(where: str, name: str) -> str:
    cls = FAMILIES[name]
    return (
        f"{where}: {name!r} is the old layout; the family is now its class and its arguments: "
        f"model: {{family: {{class_path: {class_path(cls)}, init_args: {{...}}}}}} in a config, "
        f"--model.family {cls.__name__} on the command line"
    )


def _moved(where: str, key: str) -> str:
    return (
        f"{where}: {key!r} is an argument of the model family now: write it as "
        f"model.family.init_args.{key} in a config, or --model.family.{key} on the command line"
    )


def upgrade_hparams(hparams: Mapping[str, Any]) -> dict[str, Any]:
    """A checkpoint's saved hyper-parameters in this layout: those of the old flat layout (a
    ``family`` name, every family's arguments beside the training settings) become ``family``'s
    class and the arguments that family took; any other layout comes back as it is."""
    family = hparams.get("family", "romem" if "dim" in hparams else None)
    if not isinstance(family, str):
        return dict(hparams)
    if family not in FAMILIES:
        raise UserInputError(f"the checkpoint's model.family {family!r} is not one of {sorted(FAMILIES)}")
    settings = dict(hparams)
    if "first_day" in settings:  # TNTComplEx before it said tau0, as the other families do
        settings["tau0"] = settings.pop("first_day")
    if settings.get("history_eval_splits") is None:  # the old module's default: the training split
        settings.pop("history_eval_splits", None)
    init_args = family_arguments(family, settings)
    flat = set(FLAT_KEYS) | set(LINKED) | {"family", "first_day"}
    rest = {key: value for key, value in settings.items() if key not in flat}
    return {"family": {"class_path": class_path(FAMILIES[family]), "init_args": init_args}, **rest}


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
