"""Numbers written as `1e-05`, `1E5` or `-.5` (strings to YAML 1.1, PyYAML's default) are read
as numbers wherever the project reads YAML: config files and `key=value` overrides, study files,
`grpo-research hpo --space`, and Snakemake's config (read by Snakemake with YAML 1.1, coerced by
grpo_research.pipeline.workflow_config.coerce_config). Text that is not a number stays a string."""
import json
import re
from pathlib import Path

import pytest

from grpo_research.config import load_config
from grpo_research.typed_config import parse_override, parse_yaml, safe_load

ROOT = Path(__file__).resolve().parents[1]

NUMBERS = {"1e-05": 1e-05, "1E5": 1e5, ".5": 0.5, "-.5": -0.5, "1.5e5": 1.5e5, "+2E+3": 2000.0, "3.0e-4": 3e-4,
           "1.": 1.0, "7": 7, "-3": -3}
STRINGS = ["1e5x", "1e", ".", "e5", "1.0.0", "x1e5", "1e-05 lr", "0.5.1"]


@pytest.mark.parametrize("text, value", NUMBERS.items())
def test_numbers_are_numbers_in_every_reader(text, value):
    for got in (safe_load(text), parse_yaml(text, "t"), parse_override(f"optim.lr={text}")[1],
                parse_yaml(f"{{low: {text}}}", "t")["low"]):
        assert got == value and type(got) is type(value), (text, got)


@pytest.mark.parametrize("text", STRINGS)
def test_text_that_is_not_a_number_stays_a_string(text):
    assert safe_load(text) == text and parse_override(f"k={text}")[1] == text


def test_strings_that_look_like_numbers_round_trip_and_stay_strings_in_overrides():
    """safe_dump quotes a string that safe_load would read as a number; an override a study
    writes for a string value parses back to that string."""
    from grpo_research.studies import override
    from grpo_research.typed_config import safe_dump

    data = {"group": "1e5", "tag": "-.5", "lr": 1e-05, "name": "1e5x", "n": 3, "items": ["2E3", 2e3]}
    assert safe_load(safe_dump(data)) == data
    assert parse_override(override("tracking.group", "1e5")) == (["tracking", "group"], "1e5")
    assert parse_override(override("optim.lr", 1e-05)) == (["optim", "lr"], 1e-05)


def test_a_config_file_and_overrides_read_exponents_without_a_dot(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("optim:\n  lr: 1e-05\nreward:\n  weights: {correct: 1E0, format: .5}\n")
    cfg = load_config(path, ["algo.beta=4e-2"])
    assert cfg.optim.lr == 1e-05 and cfg.algo.beta == 0.04
    assert cfg.reward.weights == {"correct": 1.0, "format": 0.5}  # a mapping's values: no float field coerces them
    assert all(type(v) is float for v in cfg.reward.weights.values())


def test_a_study_file_reads_exponents_without_a_dot(tmp_path):
    from grpo_research import studies as S

    path = tmp_path / "s.yaml"
    path.write_text("description: d\nbudget_samples: 64\nseeds: [1]\n"
                    "methods: [{method: grpo, set: {optim.lr: 1e-05}}]\n"
                    "benchmarks: {arith: {n: 4, samples: 2, temperature: 1E0}}\n")
    raw = S.load_study_file(path, ROOT / "workflow" / "schemas" / "study.schema.yaml")  # the schema wants a number
    assert raw["methods"][0]["set"]["optim.lr"] == 1e-05 and raw["benchmarks"]["arith"]["temperature"] == 1.0
    grpo = next(r for r in S.expand_study(raw, "s").runs if r.run_id.startswith("grpo-"))
    assert load_config(None, grpo.overrides).optim.lr == 1e-05


def test_the_hpo_space_sent_as_json_reads_back_as_numbers():
    """The `hpo` target failed: the pipeline writes `--space` with json.dumps (`1e-05`), the CLI
    read it with YAML 1.1 and refused the string ("low must be a finite number")."""
    from grpo_research.cli.hpo import build_parser, make_spec
    from grpo_research.hpo.search import DEFAULT_SPACE, check_space

    assert "1e-05" in json.dumps(DEFAULT_SPACE)
    args = build_parser().parse_args(["search", "--name", "s", "--method", "grpo", "--out", "o", "--n-trials", "1",
                                      "--budget-samples", "64", "--space", json.dumps(DEFAULT_SPACE)])
    spec = make_spec(args)
    assert spec.space == DEFAULT_SPACE and type(spec.space["optim.lr"]["low"]) is float
    check_space(spec.space, "grpo", [], "--space")


def test_snakemake_config_is_coerced_as_the_project_reads_yaml():
    from grpo_research.pipeline.workflow_config import coerce_config

    # what Snakemake hands the Snakefile: YAML 1.1 strings from the config file, and the items
    # of `--config KEY=VALUE` as strings (its BaseLoader)
    config = {"hpo": {"space": {"optim.lr": {"type": "float", "low": "1e-05", "high": 0.001}}, "n_trials": "3"},
              "seeds": ["4", "5"], "run_overrides": ["optim.lr=1e-05"], "tracking": {"project": "1e5x"},
              "studies": ["beta"]}
    command_line = {"seeds": ["4", "5"], "hpo": {"n_trials": "3"}, "run_overrides": ["optim.lr=1e-05"],
                    "tracking": {"project": "1e5x"}}
    coerce_config(config, command_line)
    assert config["hpo"]["space"]["optim.lr"]["low"] == 1e-05 and config["hpo"]["n_trials"] == 3
    assert config["seeds"] == [4, 5] and config["run_overrides"] == ["optim.lr=1e-05"]
    assert config["tracking"]["project"] == "1e5x" and config["studies"] == ["beta"]
    # a string of a config file (quoted: its ints are ints already) stays one, unless it is a
    # float that only YAML 1.1 reads as a string
    file_only = {"hpo": {"n_trials": "3", "budget": ".5", "lr": "1E5"}, "tracking": {"project": "1e5x"}}
    assert coerce_config(file_only) == {"hpo": {"n_trials": "3", "budget": ".5", "lr": 1e5}, "tracking": {"project": "1e5x"}}


def test_no_yaml_reader_bypasses_the_project_loader():
    """Every YAML read in the library and the workflow goes through grpo_research.typed_config
    (safe_load / parse_yaml / load_yaml), so none reads `1e-05` as a string."""
    pattern = re.compile(r"yaml\.(safe_load|load|full_load|unsafe_load)\(|Loader=yaml\.|yaml\.SafeLoader\b")
    files = [*(ROOT / "grpo_research").rglob("*.py"), ROOT / "Snakefile", *(ROOT / "workflow").rglob("*.smk")]
    offenders = [f"{f.relative_to(ROOT)}:{i}" for f in files if f.name != "typed_config.py"
                 for i, line in enumerate(f.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == []
