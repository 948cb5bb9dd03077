from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_research.models import build_char_tokenizer, build_tiny_model, count_parameters


def test_tokenizer_round_trip_with_spaces_after_save_and_auto_load(tmp_path):
    tok = build_char_tokenizer()
    model = build_tiny_model(len(tok), seed=0)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "007+348= #### 355\n    def f(x):\treturn  x + 3"
    ids = loaded(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)  # one token per character, spaces kept
    assert loaded.decode(ids) == text
    assert loaded.decode(ids + [loaded.eos_token_id], skip_special_tokens=False).endswith("<eos>")
    m = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert m.config.model_type == "llama"


def test_default_tiny_model_is_about_one_million_parameters():
    tok = build_char_tokenizer()
    n = count_parameters(build_tiny_model(len(tok)))
    assert 1_000_000 <= n <= 3_000_000
