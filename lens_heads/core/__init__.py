"""The core every other layer builds on (layer 0: it imports nothing else from lens_heads).

* models -- ``load_model`` (aliases, GGUF and checkpoint folders, the weights cache), ``tiny_model``
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
