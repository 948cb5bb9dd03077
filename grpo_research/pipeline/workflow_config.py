"""Snakemake's `config` read as the project reads YAML (numbers, booleans and null are what they
say), before the Snakefile validates it against workflow/schemas/config.schema.yaml."""
from __future__ import annotations

from typing import Any


def coerce_config(config: dict[str, Any], command_line: dict[str, Any] | None = None) -> dict[str, Any]:
    """Snakemake's `config` as the project's YAML loader (grpo_research.typed_config.safe_load)
    reads it, before the schema checks it. Snakemake reads config files with YAML 1.1, for which
    `1e-05` is a string: every string of the config that is a YAML 1.2 float becomes that float.
    `--config key=VALUE` (Snakemake's `command_line` = workflow.config_settings.overwrite_config)
    reads the items of a list or mapping VALUE as strings (`seeds='[4, 5]'` gives ['4', '5']):
    each such string is read again as a YAML scalar, so numbers, booleans and null are what they say."""
    from grpo_research.typed_config import yaml11_string_float, yaml12_scalar

    def floats(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: floats(v) for k, v in value.items()}
        if isinstance(value, list):
            return [floats(v) for v in value]
        return float(value) if isinstance(value, str) and yaml11_string_float(value) else value

    def scalars(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: scalars(v) for k, v in value.items()}
        if isinstance(value, list):
            return [scalars(v) for v in value]
        return yaml12_scalar(value) if isinstance(value, str) else value

    def overlay(target: dict, given: dict) -> None:
        for key, value in given.items():
            if isinstance(value, dict) and isinstance(target.get(key), dict):
                overlay(target[key], value)
            else:
                target[key] = scalars(value)

    config.update(floats(config))
    overlay(config, dict(command_line or {}))
    return config
