"""Prompt sources and their graders: synthetic tasks and benchmark loaders, registered by name
(config `task.name`); `build_task` makes the task of a run's `task` config section."""
from grpo_research.tasks.base import TASKS, Grade, Problem, Task, build_task, get_task, register_task, task_parameters
from grpo_research.tasks import arith as _arith  # noqa: F401  (registers "arith")
from grpo_research.tasks import code as _code  # noqa: F401  (registers "code")
from grpo_research.tasks import json_task as _json_task  # noqa: F401  (registers "json_schema")
from grpo_research.tasks import tool_task as _tool_task  # noqa: F401  (registers "tool_call")
from grpo_research.tasks import benchmarks as _benchmarks  # noqa: F401  (gsm8k, math500, humaneval, mbpp, ...)

__all__ = ["TASKS", "Grade", "Problem", "Task", "build_task", "get_task", "register_task", "task_parameters"]
