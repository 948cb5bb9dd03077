import random

from grpo_research.rewards import build_reward
from grpo_research.tasks import get_task


def test_heldout_is_fixed_and_disjoint_from_training():
    task = get_task("arith")
    held = task.heldout_problems(1000)
    assert held == get_task("arith").heldout_problems(1000)
    assert len({p.prompt for p in held}) == 1000
    train = task.train_problems(random.Random(0), 20000)
    assert not {p.prompt for p in held} & {p.prompt for p in train}
    assert all(len(p.prompt) == len("007+348=") for p in held + train)


def test_training_draws_are_seeded_and_follow_levels():
    t = get_task("arith", levels=[1], level_weights=[1.0])
    a = t.train_problems(random.Random(5), 50)
    assert a == t.train_problems(random.Random(5), 50)
    assert all(p.meta["a"] < 10 and p.meta["b"] < 10 for p in a)


def test_grader_requires_eos_and_reads_the_answer():
    task = get_task("arith")
    p = task.heldout_problems(1)[0]
    good = f"#### {p.answer}"
    assert task.grade(p, good, True).correct and task.grade(p, good, True).formatted
    assert not task.grade(p, good, finished=False).correct  # cut off: no EOS
    assert not task.grade(p, good + "<bos>", True).correct  # special token after the answer
    assert task.grade(p, f"so {p.answer}", True).correct and not task.check_format(p, f"so {p.answer}")
    assert not task.grade(p, "#### 1" + p.answer, True).correct
    assert task.grade(p, "####", True).outcome == "no_answer"


def test_weighted_reward_components():
    task = get_task("arith")
    p = task.heldout_problems(1)[0]
    reward = build_reward(task, {"correct": 1.0, "format": 0.2})
    out = reward([p, p, p], [f"#### {p.answer}", "#### 0", p.answer], [True, True, True])
    assert out.total == [1.2, 0.2, 1.0]
    assert out.components["format"] == [1.0, 1.0, 0.0]
    assert out.mask == [True, True, True]


def test_question_prompts_for_chat_models():
    import random

    from grpo_research.tasks import get_task

    task = get_task("arith", levels=[2], level_weights=[1.0], eval_level=2, question=True)
    p = task.train_problems(random.Random(0), 1)[0]
    a, b = p.meta["a"], p.meta["b"]
    assert p.prompt == f"What is {a} + {b}?" and p.answer == str(a + b)
    assert task.grade(p, f"{a} + {b} = {a + b}.").correct and not task.grade(p, f"{a + b + 1}").correct
    assert task.heldout_problems(1)[0].prompt.startswith("What is ")
