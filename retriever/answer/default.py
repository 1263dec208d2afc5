"""Which answerer answers when none is named (`--llm` left out), and where the local model comes from.

A real local model answers when one is configured, else `extract` (quotes, no model): the packaged Gemma 3 270M is
a base model that continues a prompt instead of answering it, so it is no default (it stays as `--llm llama`, to
check the pipeline). A model is configured, in this order, by:

1. `--model PATH` (a GGUF);
2. `$VAULT2OKF_GGUF`;
3. the user's config file (`$VAULT2OKF_CONFIG`, else `$XDG_CONFIG_HOME/vault2okf/config.toml`, else
   `~/.config/vault2okf/config.toml`): `[ask]` `model = "/path/to/model.gguf"`;
4. the recommended instruction-tuned Gemma GGUF (`RECOMMENDED`) already in the Hugging Face cache
   (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else huggingface_hub's default), or fetched there now when downloads
   are allowed (`vault2okf --download ask ...`, `VAULT2OKF_DOWNLOAD=1`: the user's consent).

`--llm llama` with no `--model` reads the same list and ends with the packaged 270M. Reading the list opens no
model and imports no model library; only a download imports huggingface_hub.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from retriever.answer.backends import Backend
from retriever.answer.records import AnswerError

ENV_MODEL = "VAULT2OKF_GGUF"
CONFIG_ENV = "VAULT2OKF_CONFIG"


@dataclass(frozen=True)
class Recommended:
    """A GGUF on the Hugging Face hub: the repository, the file, and what to call it."""

    repo: str
    filename: str
    label: str
    size: str

    @property
    def named(self) -> str:
        return f"{self.label} ({self.filename}, {self.size}, from {self.repo})"


RECOMMENDED = Recommended("unsloth/gemma-3-4b-it-GGUF", "gemma-3-4b-it-Q4_K_M.gguf", "Gemma 3 4B-it Q4_K_M",
                          "about 2.5 GB")  # fmt: skip
DOWNLOAD_HINT = (
    f"run `vault2okf --download ask ...` once to fetch {RECOMMENDED.named} into the Hugging Face cache, or pass "
    f"--model /path/model.gguf (or set {ENV_MODEL})"
)


@dataclass(frozen=True)
class Choice:
    """The answerer a command uses when `--llm` is not given: the backend, its model (None: its own default), and
    why, in a few words ("VAULT2OKF_GGUF is set")."""

    llm: Backend
    model: str | None
    why: str


def config_path() -> Path:
    """The user's config file (which may not exist)."""
    named = os.environ.get(CONFIG_ENV)
    if named:
        return Path(named).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "vault2okf" / "config.toml"


def config_model() -> str | None:
    """`[ask] model` of the user's config file, or None (no file, no such key); an AnswerError for a file that is
    no TOML or a model that is no string."""
    path = config_path()
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise AnswerError(f"{path}: not valid TOML ({error}) — fix it or unset {CONFIG_ENV}") from None
    ask = data.get("ask", {})
    model = ask.get("model") if isinstance(ask, dict) else None
    if model is not None and not isinstance(model, str):
        raise AnswerError(f'{path}: [ask] model = {model!r}: give the GGUF\'s path as a string ("/path/model.gguf")')
    return model or None


def hub_cache() -> Path:
    """The Hugging Face hub cache folder, read from the environment now (as huggingface_hub reads it at import)."""
    named = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if named:
        return Path(named).expanduser()
    home = os.environ.get("HF_HOME") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"
    )
    return Path(home).expanduser() / "hub"


def cached(recommended: Recommended = RECOMMENDED) -> Path | None:
    """The recommended GGUF in the hub cache (`models--<org>--<name>/snapshots/<commit>/<file>`), or None."""
    folder = hub_cache() / f"models--{recommended.repo.replace('/', '--')}" / "snapshots"
    found = sorted(folder.glob(f"*/{recommended.filename}")) if folder.is_dir() else []
    return next((p for p in found if p.is_file()), None)


def configured(model: str | None = None) -> tuple[str, str] | None:
    """The GGUF a user configured (`--model`, the environment, the config file, the cache), and where it came from;
    None when there is none."""
    if model:
        return model, "--model is given"
    if os.environ.get(ENV_MODEL):
        return os.environ[ENV_MODEL], f"{ENV_MODEL} is set"
    from_config = config_model()
    if from_config:
        return from_config, f"[ask] model is set in {config_path()}"
    in_cache = cached()
    if in_cache is not None:
        return str(in_cache), f"{RECOMMENDED.label} is in the Hugging Face cache"
    return None


def default_answerer(model: str | None = None, *, download: bool = False) -> Choice:
    """The answerer when `--llm` is left out: llama with the configured model, else (with `download`) llama with
    the recommended GGUF fetched now, else extract."""
    found = configured(model)
    if found is not None:
        return Choice(Backend.LLAMA, found[0], found[1])
    if download:
        return Choice(Backend.LLAMA, str(fetch()), f"{RECOMMENDED.label} was downloaded (--download)")
    return Choice(Backend.EXTRACT, None, f"no local model is configured ({DOWNLOAD_HINT})")


def fetch(recommended: Recommended = RECOMMENDED) -> Path:
    """The recommended GGUF downloaded into the hub cache (or found there); an AnswerError saying what to do when
    the hub cannot be reached."""
    from retriever.embed import prepare_runtime

    prepare_runtime()  # downloads are allowed: the hub is not switched off
    try:
        from huggingface_hub import hf_hub_download

        endpoint = os.environ.get("HF_ENDPOINT") or None
        path = hf_hub_download(recommended.repo, recommended.filename, cache_dir=hub_cache(), endpoint=endpoint)
    except Exception as error:  # noqa: BLE001 (the hub's errors: connection, HTTP, offline mode, disk)
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise AnswerError(
            f"could not download {recommended.named} into {hub_cache()} ({first[:200]}) — check the connection, or "
            f"download it on a connected machine (`hf download {recommended.repo} {recommended.filename}`) and copy "
            "the Hugging Face cache here; leave out --download to answer with --llm extract"
        ) from None
    return Path(path)
