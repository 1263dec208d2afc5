"""Configuration: packaged defaults (``defaults.toml``) merged with a vault's ``vault2okf.toml`` or ``--config``."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
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
    max_note_bytes: int = 5_000_000  # a bigger note is listed and reported, not parsed
    excluded_names: tuple[str, ...] = ("Template*",)  # [links] excluded_names: names of excluded notes
    base: str = ""  # set by convert, not read from a file: the folder holding the whole vault (meta.vault_base)
    source: str = CONFIG_NAME  # the file the settings came from, as errors name it (a --config path, or the default)


def load_config(vault: Path, path: Path | None = None) -> Config:
    data = tomllib.loads(files("vault2okf").joinpath("defaults.toml").read_text("utf-8"))
    user_path = path if path is not None else vault / CONFIG_NAME
    if path is not None and not path.is_file():
        raise Vault2OkfError(f"config file not found: {path}")
    if not user_path.is_file():
        return _build(data)
    _merge(data, _read(user_path))
    try:
        return replace(_build(data), source=str(user_path))
    except Vault2OkfError as exc:
        raise Vault2OkfError(f"{user_path}: {exc}") from None


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
    types = _table(data, "types")
    overrides = _table(_table(data, "links"), "overrides", "links.")
    exclude = _table(data, "walk").get("exclude", [])
    if not isinstance(exclude, list):
        raise Vault2OkfError(f"config [walk] exclude = {exclude!r}: give a list of folder names or patterns")
    names = _table(data, "links").get("excluded_names", list(Config.excluded_names))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise Vault2OkfError(f"config [links] excluded_names = {names!r}: give a list of name patterns")
    max_bytes = _table(data, "convert").get("max_note_bytes", Config.max_note_bytes)
    if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 1:
        raise Vault2OkfError(f"config [convert] max_note_bytes = {max_bytes!r}: give a whole number of bytes, >= 1")
    for name, value in (("types", types), ("links.overrides", overrides)):
        if not all(isinstance(v, str) for v in value.values()):
            raise Vault2OkfError(f"config [{name}]: every value must be a string")
    return Config(
        exclude=tuple(str(e) for e in exclude),
        types={folder_key(k): v for k, v in types.items()},
        overrides=dict(overrides),
        excluded_names=tuple(names),
        max_note_bytes=max_bytes,
    )


def _table(data: dict[str, Any], key: str, prefix: str = "") -> dict[str, Any]:
    """``data[key]`` when it is a table; a config error naming the key when it is something else."""
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise Vault2OkfError(f"config {prefix}{key} = {value!r}: [{prefix}{key}] must be a table (see defaults.toml)")
    return value


def folder_key(name: str) -> str:
    """``"01 Session Notes"`` -> ``"session notes"``: numeric prefix dropped, case-folded."""
    return strip_numeric_prefix(name).strip().casefold()


def strip_numeric_prefix(name: str) -> str:
    """``"01 People"`` -> ``"People"``, ``"2.3 Lore"`` -> ``"Lore"``: the one rule for numbered folder names."""
    head, sep, rest = name.partition(" ")
    return rest if sep and rest and head.rstrip(".-_").replace(".", "").isdigit() else name
