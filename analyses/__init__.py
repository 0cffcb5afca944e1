"""Reproductions of the papers' figures and tables, one module each, composing ``lens_heads``.

``python -m analyses`` lists them; ``python -m analyses.<name> --model ... --out DIR`` (or
``python -m analyses <name> ...``) runs one. Each module has ``run(config) -> result``, writes
its tables (CSV, markdown), figures (HTML) and reloadable result folders, and resumes: finished
stages are reused and an interrupted training continues from its checkpoint.

* :mod:`analyses.mask_table` -- Tables 1/2: a mask per built-in word task, four settings.
* :mod:`analyses.figure2_sweep`, :mod:`analyses.figure5_sweep_similarity` -- the removal sweep:
  token ranks and outputs (Figure 2), similarity to the instructed run (Figure 5).
* :mod:`analyses.figure3_trajectories`, :mod:`analyses.figure7_mask_weights` -- the mask's
  weights during training (Figure 3) and per head (Figure 7).
* :mod:`analyses.figure4_similarity` -- Figure 4 over many prompts, with its paired test.
* :mod:`analyses.figure6_alpha` -- Figure 6 and Table 8: removed heads scaled by alpha.
* :mod:`analyses.figure8_9_orders` -- Figures 8 and 9: influential vs ascending-weight removal,
  and the sweep of a negative-init mask.
* :mod:`analyses.table3_few_shot` -- Table 3: one mask on a hybrid multi-task few-shot set.
* :mod:`analyses.table5_mask_stats` -- Table 5 (Tables 37-38) and §4: mask sizes, recall,
  Jaccard against its random expectation (eq. 4), tasks per head.
* :mod:`analyses.table6_pathways` -- Table 6: removing the heads a task family shares, the
  heads it never uses, and random sets of the same sizes.
* :mod:`analyses.table7_attention` -- Table 7: attention on the target word.
* :mod:`analyses.logit_lens_tables` -- Tables 41 and 4b: the logit lens per setting.
"""
