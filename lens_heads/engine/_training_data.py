"""What a mask training sees: its split of the task, its examples encoded as prompt and answer
tokens (with each one's counterfactual donor under counterfactual ablation) and its batches."""

from __future__ import annotations

from typing import Any

import torch

from lens_heads.core import (
    Example,
    InputError,
    PromptFormat,
    Task,
    encode_example,
    has_chat_template,
)
from lens_heads.core.internal import (
    EncodedExample,
    ModelLike,
    answer_end_tokens,
    check_context,
    sample_shots,
)
from lens_heads.engine._training_config import CONTRASTED, TrainingConfig

__all__ = ["batch_indices", "check_counterfactuals", "encode_training", "training_split"]


def training_split(task: Task, config: TrainingConfig) -> Task:
    if config.n_eval == 0:
        return task
    if len(task) <= config.n_eval:
        raise InputError(
            f"task {task.name!r} has {len(task)} examples, not more than the n_eval="
            f"{config.n_eval} held out of training (--holdout): pass a smaller n_eval, or "
            "n_eval=0 (--holdout 0 --n-eval 0) to train on every example"
        )
    train, _ = task.split(n_eval=config.n_eval, seed=config.split_seed)
    return train


def encode_training(
    model: ModelLike, train: Task, config: TrainingConfig
) -> tuple[list[EncodedExample], list[list[int]] | None, list[int] | None]:
    """The training examples encoded (prompt and answer tokens); for counterfactual ablation,
    each one's donor: its counterfactual prompt, rendered alike and of the same token length,
    continued with the example's own answer tokens; for the objectives of ``CONTRASTED``, each one's
    contrast: the first token of its counterfactual's answer, encoded after the counterfactual
    prompt as the answer is after the prompt."""
    tokenizer = model.tokenizer
    chat = has_chat_template(tokenizer) if config.chat is None else config.chat
    end = answer_end_tokens(
        tokenizer, chat=chat, answer_end=config.answer_end, separator=config.separator
    )
    instruction = train.instruction if config.instructed else None
    encoded: list[EncodedExample] = []
    donors: list[list[int]] | None = [] if config.ablation == "counterfactual" else None
    contrasts: list[int] | None = [] if config.objective in CONTRASTED else None
    for index, example in enumerate(train.examples):
        demos: tuple[tuple[str, str], ...] = ()
        if config.shots:
            demos = sample_shots(
                train, config.shots, seed=config.seed * 100_003 + index, exclude=example.input
            )
        fmt = PromptFormat(
            chat=chat, instruction=instruction, shots=demos, separator=config.separator
        )
        prompt = fmt.render(example.input, tokenizer)
        encoded.append(encode_example(tokenizer, prompt, example.output, chat=chat, end_tokens=end))
        check_context(
            model,
            len(encoded[-1].tokens),
            what=f"training example {index} ({example.input[:40]!r})",
        )
        if donors is not None and example.counterfactual is not None:
            other = fmt.render(example.counterfactual, tokenizer)
            donor = encode_example(tokenizer, other, example.output, chat=chat).prompt_tokens
            clean = encoded[-1]
            if len(donor) != len(clean.prompt_tokens):
                raise InputError(
                    f"training example {index} ({example.input[:40]!r}) has "
                    f"{len(clean.prompt_tokens)} prompt tokens and its counterfactual "
                    f"({example.counterfactual[:40]!r}) {len(donor)}: a counterfactual prompt "
                    "must have exactly as many (lens_heads.finders.counterfactual_pairs pairs them)"
                )
            donors.append([*donor, *clean.tokens[len(clean.prompt_tokens) :]])
        if contrasts is not None:
            contrasts.append(_contrast(tokenizer, fmt, example, index, chat))
    return encoded, donors, contrasts


def _contrast(tokenizer: Any, fmt: PromptFormat, example: Example, index: int, chat: bool) -> int:
    if example.counterfactual is None or not example.counterfactual_output:
        raise InputError(
            f"objectives {', '.join(CONTRASTED)} need every training example's counterfactual "
            f"input and its answer (Example.counterfactual, Example.counterfactual_output); "
            f"example {index} ({example.input[:40]!r}) lacks one (lens_heads.finders builds "
            "such tasks)"
        )
    other = fmt.render(example.counterfactual, tokenizer)
    encoded = encode_example(tokenizer, other, example.counterfactual_output, chat=chat)
    return int(encoded.answer_tokens[0])


def check_counterfactuals(train: Task, config: TrainingConfig) -> None:
    """Counterfactual ablation needs every training example's counterfactual input."""
    missing = [i for i, e in enumerate(train.examples) if e.counterfactual is None]
    if config.ablation == "counterfactual" and missing:
        raise InputError(
            f"ablation='counterfactual' needs a counterfactual input for every training example "
            f"of task {train.name!r} (Example.counterfactual); {len(missing)} have none, the "
            f"first is example {missing[0]} (lens_heads.finders builds such tasks)"
        )


def batch_indices(step: int, n: int, batch_size: int, seed: int) -> list[int]:
    """Examples of batch ``step``: epochs of seeded permutations, the last partial batch of an
    epoch dropped. A pure function of its arguments, so a resumed run sees the same batches."""
    per_epoch = n // batch_size
    epoch, offset = divmod(step, per_epoch)
    generator = torch.Generator().manual_seed((seed * 1_000_003 + epoch + 1) % 2**63)
    order = torch.randperm(n, generator=generator)
    return order[offset * batch_size : (offset + 1) * batch_size].tolist()
