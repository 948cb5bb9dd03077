"""Shared helpers of the kill-and-resume tests."""
import json
import signal
import subprocess
import time

TIMING = ("step_s", "rollout_s", "update_s", "peak_mem_mb", "eval_s")


def deterministic(rows):
    """Metrics rows without the fields that depend on wall time (timings, cost/)."""
    return [{k: v for k, v in r.items() if k not in TIMING and not k.startswith("cost/")} for r in rows]


def written_steps(metrics):
    """The steps of the complete rows of a metrics file another process is still writing: a
    line without its newline is half-written and is skipped, never parsed."""
    text = metrics.read_text() if metrics.exists() else ""
    return [json.loads(l)["step"] for l in text.split("\n")[:-1] if l.strip()]


def kill_after_step(cmd, metrics, step, env, sig=signal.SIGKILL, timeout=120):
    """Start `cmd`, send `sig` once `metrics` holds a row with step >= `step`; return
    (process, the largest step seen then, or None if the run ended first)."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + timeout
    seen = None
    while time.time() < deadline and proc.poll() is None:
        steps = written_steps(metrics)
        if steps and max(steps) >= step:
            proc.send_signal(sig)
            seen = max(steps)
            break
        time.sleep(0.002)
    return proc, seen


# The overrides that make a training run take seconds on the tiny test model; a test adds its
# own after them (a later key=value wins).
FAST_RUN = ["train.eval_size=20", "train.threads=1", "rollout.prompts_per_step=2", "algo.group_size=4",
            "rollout.max_new_tokens=10", "tracking.progress=false", "tracking.wandb=disabled"]


def fast_run(*extra: str) -> list[str]:
    """FAST_RUN followed by `extra` overrides."""
    return [*FAST_RUN, *extra]


# A chat model for the real-model code path: a tiny random Llama with a byte-level BPE vocabulary
# trained here and a ChatML template (what SmolLM2-Instruct and Qwen ship), built offline.
CHATML = ("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{'<|im_start|>assistant\n'}}{% endif %}")
CHAT_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_chat_model(out, eos="<|endoftext|>", seed=0, ctx=512):
    """Save a tiny random Llama + BPE tokenizer with a ChatML template in `out`. Its EOS is
    `eos` (by default not the end-of-turn token, as in some hub checkpoints)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    corpus = ["What is 12 + 30? The answer is 42.", "#### 42", "def add(a, b):\n    return a + b",
              "user\nassistant\nsystem\n", "Question: Solve the problem step by step. Answer:"] * 20
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=CHAT_SPECIAL,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=eos, pad_token="<|endoftext|>",
                                  additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    tok.chat_template = CHATML
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=ctx,
                      eos_token_id=tok.convert_tokens_to_ids(eos), pad_token_id=tok.pad_token_id,
                      bos_token_id=tok.convert_tokens_to_ids("<|im_start|>"), tie_word_embeddings=True)
    torch.manual_seed(seed)
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out
