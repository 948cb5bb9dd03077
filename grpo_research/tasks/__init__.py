"""Prompt sources and their graders: synthetic tasks and benchmark loaders."""
from grpo_research.tasks.base import TASKS, Grade, Problem, Task, get_task, register_task
from grpo_research.tasks import arith as _arith  # noqa: F401  (registers "arith")

__all__ = ["TASKS", "Grade", "Problem", "Task", "get_task", "register_task"]
