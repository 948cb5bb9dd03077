"""Bad input is one `error:` line and exit 2, before anything is written (issue 13, items 7 and 9)."""
import pytest

from grpo_research.cli import main
from grpo_research.config import load_config
from grpo_research.errors import ConfigError

DEEP = "[" * 3000 + "]" * 3000


@pytest.mark.parametrize("overrides, needle", [
    (["reward.weights={}"], "'reward.weights' is empty"),
    (["reward.options={correct: {strict: true}}"], "'reward.options.correct.strict' is not an option"),
    (["reward.weights={overlong: 1.0}", "reward.options={overlong: {maxlen: 3}}"],
     "'reward.options.overlong.maxlen' is not an option of reward term 'overlong'"),
    (["reward.options={format: {}}", "reward.weights={correct: 1.0}"], "'format' is not a term of reward.weights"),
    (["seed=99999999999999999999999"], "'seed' = 99999999999999999999999 must be in"),
    (["base.seed=-99999999999999999999999"], "'base.seed' = -99999999999999999999999 must be in"),
    (["algo.group_size=100000"], "'algo.group_size' = 100000 must be in [2, 1024]"),
    (["rollout.prompts_per_step=1000", "algo.group_size=1000"], "more than the limit of 65536"),
    (["algo.beta=.nan"], "'algo.beta' = nan must be a finite number"),
    (["optim.lr=.inf"], "'optim.lr' = inf must be a finite number"),
    (["reward.weights={correct: .nan}"], "'reward.weights.correct' = nan must be a finite number"),
    ([f"task.options={DEEP}"], "nested more than 50 levels deep"),
    (["reward.weights={correct: 0.0, format: 0}"], "are all 0: the reward would be 0 for every completion"),
])
def test_bad_values_are_one_line(overrides, needle, tmp_path, capsys):
    with pytest.raises(ConfigError) as e:
        load_config(None, overrides)
    assert needle in str(e.value) and "\n" not in str(e.value)
    run = tmp_path / "run"
    assert main(["train", "--run-dir", str(run), *overrides]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and needle in err[0]
    assert not run.exists()


@pytest.mark.parametrize("text, needle", [
    ("algo:\n  beta: 0.1\n  beta: 0.2\n", "c.yaml:3: malformed YAML (duplicate key 'beta' (first on line 2))"),
    ("a: &x [1, 2]\nb: *x\n", "YAML aliases (*name) are not allowed"),
    ("a: &a [1,2,3,4,5,6,7,8,9]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n",
     "YAML aliases (*name) are not allowed"),  # the start of a "billion laughs"
    ("a: " + DEEP + "\n", "nested more than 50 levels deep"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "is not a text (UTF-8) file"),
    (b"algo:\x00\n", "is not a text file (it holds NUL bytes)"),
])
def test_bad_config_files_are_one_line(text, needle, tmp_path, capsys):
    f = tmp_path / "c.yaml"
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert needle in str(e.value)
    assert main(["train", "--config", str(f), "--run-dir", str(tmp_path / "run")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize("path, needle", [
    ("/no/such/model", "model.name_or_path=/no/such/model: no such directory"),
    ("./missing-checkpoint", "no such directory"),
    ("not a model name!", "neither a local directory nor a hub name"),
])
def test_a_model_that_does_not_exist_is_one_line(path, needle, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--run-dir", str(run), f"model.name_or_path={path}", "train.threads=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]
    assert not run.exists()


def test_a_directory_that_is_not_a_checkpoint_is_one_line(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["train", "--run-dir", str(tmp_path / "run"), f"model.name_or_path={empty}", "train.threads=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a directory without config.json (not a checkpoint)" in err[0]
    assert not (tmp_path / "run").exists()


def test_max_new_tokens_beyond_the_context_is_refused(tiny_model_dir, tmp_path, capsys):
    # the test model has a 64-token context; arith prompts are 8 characters
    run = tmp_path / "run"
    assert main(["train", "--run-dir", str(run), f"model.name_or_path={tiny_model_dir}", "train.threads=1",
                 "rollout.max_new_tokens=60", "train.eval_size=10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "exceeds the model's context of 64 tokens" in err[0]
    assert not (run / "metrics.jsonl").exists()


@pytest.mark.parametrize("path, needle", [
    ("/dev/urandom", "is not a regular file"),  # read whole, this never ended (killed for memory)
    ("/tmp", "is not a regular file"),
])
def test_a_config_path_that_is_not_a_file_is_one_line(path, needle, tmp_path, capsys):
    assert main(["config", "--config", path]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_an_oversized_config_file_is_one_line(tmp_path, capsys):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as f:
        f.truncate(17 * 2**20)
    assert main(["config", "--config", str(big)]) == 2
    assert "over the limit of 16,777,216" in capsys.readouterr().err


def test_damaged_weights_are_one_line_and_leave_no_run_dir(tiny_model_dir, tmp_path, capsys):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    run = tmp_path / "run"
    assert main(["train", "--run-dir", str(run), f"model.name_or_path={model}", "train.threads=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"model.name_or_path={model}: cannot load a model from it" in err[0], err
    assert not run.exists()


def test_sft_out_that_is_a_file_is_one_line(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("keep")
    assert main(["sft", "--out", str(f)]) == 2
    assert "is a file; give a new or empty directory" in capsys.readouterr().err and f.read_text() == "keep"
