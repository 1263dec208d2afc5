"""Configuration: packaged defaults (``defaults.toml``) merged with a vault's ``vault2okf.toml`` or ``--config``."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from vault2okf.errors import Vault2OkfError

CONFIG_NAME = "vault2okf.toml"


@dataclass(frozen=True)
class Config:
    exclude: tuple[str, ...] = ()
    types: dict[str, str] = field(default_factory=dict)  # folder name (case-folded, no numeric prefix) -> type
    overrides: dict[str, str] = field(default_factory=dict)  # link name -> vault path


def load_config(vault: Path, path: Path | None = None) -> Config:
    data = tomllib.loads(files("vault2okf").joinpath("defaults.toml").read_text("utf-8"))
    user_path = path if path is not None else vault / CONFIG_NAME
    if path is not None and not path.is_file():
        raise Vault2OkfError(f"config file not found: {path}")
    if user_path.is_file():
        _merge(data, _read(user_path))
    return _build(data)


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise Vault2OkfError(f"{path}: not valid TOML: {exc}") from exc


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _build(data: dict[str, Any]) -> Config:
    types = data.get("types", {})
    overrides = data.get("links", {}).get("overrides", {})
    exclude = data.get("walk", {}).get("exclude", [])
    for name, value in (("types", types), ("links.overrides", overrides)):
        if not all(isinstance(v, str) for v in value.values()):
            raise Vault2OkfError(f"config [{name}]: every value must be a string")
    return Config(
        exclude=tuple(str(e) for e in exclude),
        types={folder_key(k): v for k, v in types.items()},
        overrides=dict(overrides),
    )


def folder_key(name: str) -> str:
    """``"01 Session Notes"`` -> ``"session notes"``: numeric prefix dropped, case-folded."""
    head, sep, rest = name.partition(" ")
    if sep and rest and head.rstrip(".-_").replace(".", "").isdigit():
        name = rest
    return name.strip().casefold()
