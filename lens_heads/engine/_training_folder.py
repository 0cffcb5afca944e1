"""The one way to get a trained mask into a folder: load it when the folder holds a finished
training of the same settings, resume it when the folder holds an interrupted one, train it
otherwise -- with the one settings guard, so a folder is never reused for other settings.

>>> import tempfile
>>> import lens_heads as lh
>>> from lens_heads.core._tasks import Example, Task
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> task = Task("upper", tuple(Example(w, w.upper()) for w in "abcdefghijkl"))
>>> config = lh.TrainingConfig(steps=2, batch_size=4, n_eval=4, precision="float32")
>>> folder = tempfile.mkdtemp()
>>> first = train_or_resume(model, task, config, folder, progress=False)
>>> again = train_or_resume(model, task, config, folder, progress=False)  # loaded, not retrained
>>> bool((first.W == again.W).all()), again.timing == first.timing
(True, True)
"""

from __future__ import annotations

import os
from pathlib import Path

from lens_heads.core import Fingerprint, Task
from lens_heads.core.internal import ModelLike, check_fingerprint
from lens_heads.engine._training import CheckpointError, train_mask
from lens_heads.engine._training_config import TrainingConfig
from lens_heads.engine._training_result import MaskTrainingResult

__all__ = ["train_or_resume"]

REMEDY = "delete the folder to train again, or choose another folder"


def train_or_resume(
    model: ModelLike,
    task: Task,
    config: TrainingConfig,
    folder: str | os.PathLike[str],
    *,
    progress: bool = True,
    checkpoint_every: int = 50,
    figures: bool = False,
    png: bool = False,
    remedy: str = REMEDY,
    error: type[Exception] = CheckpointError,
) -> MaskTrainingResult:
    """The mask of ``task`` trained with ``config`` in ``folder``:

    * a finished training there (``training.json``) is loaded -- refused with ``error`` (naming
      what differs, and ``remedy``) when it was trained with another model (weights, tokenizer),
      on other examples or with other settings; ``precision="auto"`` accepts the precision it
      resolved to where it trained; a training of lens_heads 0.2, which recorded no
      fingerprint, is reused with a warning;
    * otherwise :func:`train_mask` trains, resuming ``folder/checkpoints`` when an interrupted
      run left one (it refuses a checkpoint of other settings itself), and the result is saved
      into ``folder`` (its figures too with ``figures``, as PNG as well with ``png``).
    """
    folder = Path(folder)
    if (folder / "training.json").is_file():
        done = MaskTrainingResult.load(folder)
        stored = done.config.to_dict()
        wanted = config.to_dict()
        if config.precision == "auto":
            wanted["precision"] = stored.get("precision")
        recorded = done.fingerprint
        check_fingerprint(
            Fingerprint(
                {**stored, "task": done.task}, recorded.get("model"), recorded.get("data", {})
            ),
            Fingerprint.of(model, {**wanted, "task": task.name}, {"task": task}),
            where=folder,
            what="a training",
            remedy=remedy,
            known=bool(recorded),
            error=error,
        )
        return done
    result = train_mask(
        model,
        task,
        config,
        checkpoint_dir=folder / "checkpoints",
        checkpoint_every=checkpoint_every,
        resume=True,
        progress=progress,
    )
    result.save(folder)
    if figures:
        result.save_figures(folder, png=png)
    return result
