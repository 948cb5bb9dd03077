import os

import pytest

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `pytest -n N`: N workers share the cores. One torch thread per worker (and per process a
    # test starts) instead of torch's default of every core: oversubscribed threads ran ~8x slower
    # on this project's 2-core machines.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A small randomly initialised char Llama saved like a hub checkpoint."""
    from grpo_research.models import build_char_tokenizer, build_tiny_model

    d = tmp_path_factory.mktemp("tiny_model")
    tok = build_char_tokenizer()
    model = build_tiny_model(len(tok), hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                             max_position_embeddings=64, seed=0)
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.fixture
def fast_overrides():
    """`fast_overrides(*extra)`: the fast-run overrides (tests/helpers.py FAST_RUN) plus `extra`."""
    from tests.helpers import fast_run

    return fast_run


@pytest.fixture(scope="session")
def chat_model_dir(tmp_path_factory):
    """A tiny random Llama with a real BPE tokenizer and a ChatML template (tests/helpers.py)."""
    from tests.helpers import build_chat_model

    return build_chat_model(tmp_path_factory.mktemp("chat_model"))
