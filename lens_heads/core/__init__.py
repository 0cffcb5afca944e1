"""The core every other layer builds on (layer 0: it imports nothing else from lens_heads).

* models -- ``load_model`` (aliases, GGUF and checkpoint folders, the weights cache)
* the types public signatures name: ``ModelLike`` (a TransformerLens model of either kind),
  ``PromptLike`` (text, token ids or a tensor), ``MaskLike`` (a ``HeadMask`` or a tensor of
  multipliers), ``ParallelCorpus`` and ``EncodedExample``
* model_configs, model_shape, random_models -- the papers' models' shipped configurations, a
  model's shape before its weights, ``random_model`` (their real size, random weights: time and
  memory only) and ``tiny_model``
* masks, scales -- ``HeadMask`` (0/1 or soft, alpha, labels, algebra, files), ``HeadScale`` (x3, x0)
* hooks -- the one mask mechanism: a multiplier per query head on ``blocks.{l}.attn.hook_z``
* prompts, tasks -- prompt formats and encoding; built-in tasks, the parallel corpus, loaders
* metrics -- the papers' accuracy rules, exact match, echo rate, answer CE, ROUGE-L, BLEU, chrF++
* decoding, generation -- KV-cached batched greedy decoding (shared prefix run once)
* capture, logits -- activations at a position under a mask; logits only at the answer positions
* language_id -- the one language identifier (langid)
* compatibility, families -- checks against plain ``transformers`` (``lens-heads doctor``) and
  tiny offline checkpoints of the papers' model families (docs/compatibility.md)
* storage, locks, tables, figures, checks -- atomic writes, result folders, stages and the
  settings guard; folder claims; the markdown-table writer; the figures' shared layout;
  argument and context checks
"""

from typing import TYPE_CHECKING

from lens_heads.core._lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (lens_heads.core._lazy): no torch before it is needed
    from lens_heads.core._capture import PromptLike
    from lens_heads.core._checks import resolve_mask
    from lens_heads.core._errors import InputError, LensHeadsError
    from lens_heads.core._fingerprints import Fingerprint, claim_folder
    from lens_heads.core._generation import Generation, generate, greedy_generate
    from lens_heads.core._generation_config import DecodingConfig, GenerationConfig
    from lens_heads.core._guards import verify_model
    from lens_heads.core._hooks import MaskLike, ablated, apply_mask, mask_hooks
    from lens_heads.core._language_id import CORPUS_LANGUAGES, identify_language
    from lens_heads.core._libraries import LibraryMismatchError, library_versions
    from lens_heads.core._logits import answer_logits
    from lens_heads.core._masks import (
        HeadMask,
        MaskSource,
        TrainedMask,
        expected_random_jaccard,
        format_head,
        jaccard,
    )
    from lens_heads.core._model_specs import UnsupportedModelError
    from lens_heads.core._models import MODEL_ALIASES, ModelLike, head_shape, load_model
    from lens_heads.core._prompts import (
        INSTRUCTION_TEMPLATE,
        EncodedExample,
        PromptFormat,
        collate,
        encode_example,
        has_chat_template,
        hybrid_few_shot,
        pad_token_id,
    )
    from lens_heads.core._provenance import (
        Contents,
        code_version,
        content_hash,
        data_hashes,
        hash_sources,
        machine,
        run_record,
    )
    from lens_heads.core._random_models import random_model, tiny_model
    from lens_heads.core._result_repr import ResultRepr
    from lens_heads.core._scales import HeadScale
    from lens_heads.core._settings import configure, field_docs
    from lens_heads.core._storage import (
        PlotlyJs,
        Stages,
        save_figures,
        write_atomic,
        write_plotly_js,
    )
    from lens_heads.core._tables import markdown_table
    from lens_heads.core._task_types import MatchRule, TaskKind
    from lens_heads.core._tasks import (
        Example,
        ParallelCorpus,
        Task,
        get_task,
        list_tasks,
        parallel_corpus,
    )

_EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "CORPUS_LANGUAGES",
    "INSTRUCTION_TEMPLATE",
    "MODEL_ALIASES",
    "Contents",
    "DecodingConfig",
    "EncodedExample",
    "Example",
    "Fingerprint",
    "Generation",
    "GenerationConfig",
    "HeadMask",
    "HeadScale",
    "InputError",
    "LensHeadsError",
    "LibraryMismatchError",
    "MaskLike",
    "MaskSource",
    "MatchRule",
    "ModelLike",
    "ParallelCorpus",
    "PlotlyJs",
    "PromptFormat",
    "PromptLike",
    "ResultRepr",
    "Stages",
    "Task",
    "TaskKind",
    "TrainedMask",
    "UnsupportedModelError",
    "ablated",
    "answer_logits",
    "apply_mask",
    "claim_folder",
    "code_version",
    "collate",
    "configure",
    "content_hash",
    "data_hashes",
    "encode_example",
    "expected_random_jaccard",
    "field_docs",
    "format_head",
    "generate",
    "get_task",
    "greedy_generate",
    "has_chat_template",
    "hash_sources",
    "head_shape",
    "hybrid_few_shot",
    "identify_language",
    "jaccard",
    "library_versions",
    "list_tasks",
    "load_model",
    "machine",
    "markdown_table",
    "mask_hooks",
    "pad_token_id",
    "parallel_corpus",
    "random_model",
    "resolve_mask",
    "run_record",
    "save_figures",
    "tiny_model",
    "verify_model",
    "write_atomic",
    "write_plotly_js",
]
